package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/sandbox"
	"github.com/berm-dev/berm/runtime/store"
)

// Deployments is what the control API serves: a service's deployments.
// *service.Service is one; so is the Client, for a server that forwards.
type Deployments interface {
	Deploy(ctx context.Context, name string, image []byte, source string, grants *sandbox.Grants) (Info, error)
	Remove(ctx context.Context, name string, keepData bool) error
	List(ctx context.Context) ([]Info, error)
	Inspect(ctx context.Context, name string) (Details, error)
}

// Puller pulls an OCI reference for a deploy through the control API,
// returning the image and the source to record (the reference, pinned).
type Puller interface {
	Pull(ctx context.Context, ref string) (image []byte, source string, err error)
}

// ServerOptions configure the control API's handler.
type ServerOptions struct {
	// Puller serves a deploy of a reference ({"ref": ...}); without one
	// such a deploy is refused.
	Puller Puller
	// TakesGrants lets a deploy grant what it asks for (GrantsParam). Set
	// it only behind a token: on loopback without one, any local user
	// could grant a program berm's own directories.
	TakesGrants bool
}

// Handler serves the control API under /v1/programs. It reads request
// bodies whole, so the server it is mounted in bounds them first.
func Handler(d Deployments, opts ServerOptions) http.Handler {
	h := &handler{d: d, opts: opts}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/programs", h.list)
	mux.HandleFunc("GET /v1/programs/{name}", h.get)
	mux.HandleFunc("DELETE /v1/programs/{name}", h.remove)
	mux.HandleFunc("PUT /v1/programs/{name}", h.put)
	return mux
}

type handler struct {
	d    Deployments
	opts ServerOptions
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	list, err := h.d.List(r.Context())
	if err != nil {
		writeStoreError(w, err)
		return
	}
	WriteJSON(w, http.StatusOK, list)
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	d, err := h.d.Inspect(r.Context(), r.PathValue("name"))
	if err != nil {
		writeStoreError(w, err)
		return
	}
	WriteJSON(w, http.StatusOK, d)
}

func (h *handler) remove(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := h.d.Remove(r.Context(), name, r.URL.Query().Get("keep_data") == "true"); err != nil {
		writeStoreError(w, err)
		return
	}
	WriteJSON(w, http.StatusOK, map[string]string{"removed": name})
}

// put deploys the image in the body (application/wasm), or the reference a
// JSON body names, which the server pulls with its own credentials.
func (h *handler) put(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	body, err := readBody(r)
	if err != nil {
		WriteError(w, http.StatusBadRequest, "invalid", fmt.Errorf("image: %w", err))
		return
	}
	var grants *sandbox.Grants
	if g := r.URL.Query().Get(GrantsParam); g != "" {
		if !h.opts.TakesGrants {
			WriteError(w, http.StatusForbidden, "grant", fmt.Errorf("%w: this server has no token, so it takes no grants through its control API: "+
				"any local user could grant a program berm's own files (start it with --token, or deploy with grants into its root)", sandbox.ErrGrant))
			return
		}
		grants = new(sandbox.Grants)
		dec := json.NewDecoder(strings.NewReader(g))
		dec.DisallowUnknownFields()
		if err := dec.Decode(grants); err != nil {
			WriteError(w, http.StatusBadRequest, "grant", fmt.Errorf("%w: the %s parameter: %v", sandbox.ErrGrant, GrantsParam, err))
			return
		}
	}
	image, source := body, r.URL.Query().Get("source")
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/json" {
		var req DeployRequest
		if err := json.Unmarshal(body, &req); err != nil || req.Ref == "" {
			WriteError(w, http.StatusBadRequest, "invalid", errors.New(`want a JSON body {"ref": "host/repo:tag"}`))
			return
		}
		if h.opts.Puller == nil {
			WriteError(w, http.StatusBadRequest, "pull", fmt.Errorf("%s: %w: this server has no registry client", req.Ref, ErrPull))
			return
		}
		if image, source, err = h.opts.Puller.Pull(r.Context(), req.Ref); err != nil {
			WriteError(w, http.StatusBadGateway, "pull", fmt.Errorf("%w: %v", ErrPull, err))
			return
		}
	}
	info, err := h.d.Deploy(r.Context(), name, image, source, grants)
	if err != nil {
		writeStoreError(w, err)
		return
	}
	WriteJSON(w, http.StatusOK, info)
}

// HeldBody is a request body the mounting server has already read whole
// and counted against its bound: Handler takes its bytes as they are rather
// than copying an image of up to 64 MiB a second time.
type HeldBody struct {
	*bytes.Reader
	b []byte
}

// NewHeldBody is b as a request body that Handler reads without a copy.
func NewHeldBody(b []byte) *HeldBody { return &HeldBody{Reader: bytes.NewReader(b), b: b} }

// Close releases nothing: the server that read the body holds it.
func (*HeldBody) Close() error { return nil }

func readBody(r *http.Request) ([]byte, error) {
	if held, ok := r.Body.(*HeldBody); ok {
		return held.b, nil
	}
	return io.ReadAll(r.Body)
}

func writeStoreError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, store.ErrNotDeployed):
		WriteError(w, http.StatusNotFound, "not_deployed", err)
	case errors.Is(err, manifest.ErrProgramName):
		WriteError(w, http.StatusBadRequest, "name", err)
	case errors.Is(err, manifest.ErrInvalid):
		WriteError(w, http.StatusBadRequest, "invalid", err)
	case errors.Is(err, sandbox.ErrGrant):
		WriteError(w, http.StatusBadRequest, "grant", err)
	case errors.Is(err, runtime.ErrRefused), errors.Is(err, manifest.ErrServedName):
		WriteError(w, http.StatusBadRequest, "refused", err)
	case errors.Is(err, store.ErrUnavailable):
		// The client may try again; where the database is, is the
		// operator's to read in the log.
		WriteError(w, http.StatusServiceUnavailable, "unavailable", errStateUnavailable)
	default:
		WriteError(w, http.StatusInternalServerError, "internal", err)
	}
}

// errStateUnavailable is what a client is told of a state it cannot reach now.
var errStateUnavailable = fmt.Errorf("the server's %w: try again later", store.ErrUnavailable)

// WriteError answers with an ErrorBody: every error of berm serve's HTTP
// routes has this shape.
func WriteError(w http.ResponseWriter, status int, kind string, err error) {
	WriteJSON(w, status, ErrorBody{Error: err.Error(), Kind: kind})
}

// WriteJSON answers with v, indented.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
