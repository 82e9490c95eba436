package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/sandbox"
	"github.com/berm-dev/berm/runtime/store"
)

// ErrPull: the server could not pull the reference it was asked to deploy.
var ErrPull = errors.New("pull failed")

// DeployRequest is the JSON body of a PUT that deploys from a reference.
type DeployRequest struct {
	Ref string `json:"ref"`
}

// ErrorBody is the control API's error: the message, and a kind the client
// maps back to the error it stands for.
type ErrorBody struct {
	Error string `json:"error"`
	Kind  string `json:"kind"`
}

// ErrUnreachable: no berm server answered at the URL.
var ErrUnreachable = errors.New("unreachable")

// ErrUnauthorized: the server wants a token this client did not give, or a
// different one.
var ErrUnauthorized = errors.New("unauthorized")

// Client drives a berm server's control API, for `berm deploy|ls|rm|inspect
// --server URL`.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// NewClient returns a client of the server at base (http://host:port).
func NewClient(base, token string) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server %q: want a URL such as http://127.0.0.1:7777", base)
	}
	if strings.HasSuffix(u.Path, "/mcp") {
		// The control API is at /v1 beside /mcp, which is MCP's.
		return nil, fmt.Errorf("server %q: want the server's URL without /mcp (%s)", base, strings.TrimSuffix(u.String(), "/mcp"))
	}
	return &Client{base: u, token: token, http: http.DefaultClient}, nil
}

// Deploy uploads an image to be deployed under name with grants (nil
// grants nothing; paths name the server's directories).
func (c *Client) Deploy(ctx context.Context, name string, image []byte, source string, grants *sandbox.Grants) (Info, error) {
	var info Info
	q, err := grantsQuery(grants)
	if err != nil {
		return info, err
	}
	if source != "" {
		q.Set("source", source)
	}
	err = c.do(ctx, http.MethodPut, "/v1/programs/"+url.PathEscape(name), q, image, "application/wasm", &info)
	return info, err
}

// DeployRef asks the server to pull ref, with its own credentials, and
// deploy it under name with grants.
func (c *Client) DeployRef(ctx context.Context, name, ref string, grants *sandbox.Grants) (Info, error) {
	var info Info
	q, err := grantsQuery(grants)
	if err != nil {
		return info, err
	}
	body, err := json.Marshal(DeployRequest{Ref: ref})
	if err != nil {
		return info, err
	}
	err = c.do(ctx, http.MethodPut, "/v1/programs/"+url.PathEscape(name), q, body, "application/json", &info)
	return info, err
}

// GrantsParam is the query parameter of a deploy that carries its grants,
// as JSON, whether the body is an image or a DeployRequest.
const GrantsParam = "grants"

func grantsQuery(g *sandbox.Grants) (url.Values, error) {
	q := url.Values{}
	if g.IsZero() {
		return q, nil
	}
	b, err := json.Marshal(g)
	if err != nil {
		return nil, err
	}
	q.Set(GrantsParam, string(b))
	return q, nil
}

// List lists the server's deployments.
func (c *Client) List(ctx context.Context) ([]Info, error) {
	var list []Info
	err := c.do(ctx, http.MethodGet, "/v1/programs", nil, nil, "", &list)
	return list, err
}

// Inspect returns the details of the program deployed under name.
func (c *Client) Inspect(ctx context.Context, name string) (Details, error) {
	var d Details
	err := c.do(ctx, http.MethodGet, "/v1/programs/"+url.PathEscape(name), nil, nil, "", &d)
	return d, err
}

// Remove removes the deployment under name and, unless keepData, its data.
func (c *Client) Remove(ctx context.Context, name string, keepData bool) error {
	q := url.Values{}
	if keepData {
		q.Set("keep_data", "true")
	}
	return c.do(ctx, http.MethodDelete, "/v1/programs/"+url.PathEscape(name), q, nil, "", nil)
}

// Close releases nothing: a client holds no connection of its own beyond
// the shared transport's idle ones.
func (c *Client) Close() {}

func (c *Client) do(ctx context.Context, method, path string, query url.Values, body []byte, contentType string, out any) error {
	u := *c.base
	u.Path += path
	u.RawQuery = query.Encode()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), r)
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("server %s: %w: %v", c.base, ErrUnreachable, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("server %s: %w", c.base, err)
	}
	if resp.StatusCode/100 != 2 {
		var e ErrorBody
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			return fmt.Errorf("server %s: %s", c.base, resp.Status)
		}
		// The kind maps the error back to what it stands for, so that a
		// remote error has the exit code and hint a local one would.
		if sentinel := kinds[e.Kind]; sentinel != nil && !strings.Contains(e.Error, sentinel.Error()) {
			return fmt.Errorf("%s: %w", e.Error, sentinel)
		} else if sentinel != nil {
			return remoteError{msg: e.Error, sentinel: sentinel}
		}
		return errors.New(e.Error)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("server %s: bad response: %w", c.base, err)
	}
	return nil
}

var kinds = map[string]error{
	"not_deployed": store.ErrNotDeployed,
	"name":         manifest.ErrProgramName,
	"invalid":      manifest.ErrInvalid,
	"refused":      runtime.ErrRefused,
	"pull":         ErrPull,
	"too_large":    runtime.ErrRefused,
	"unauthorized": ErrUnauthorized,
	"grant":        sandbox.ErrGrant,
	"unavailable":  store.ErrUnavailable,
}

// remoteError is a server's message that already names its sentinel.
type remoteError struct {
	msg      string
	sentinel error
}

func (e remoteError) Error() string { return e.msg }
func (e remoteError) Unwrap() error { return e.sentinel }
