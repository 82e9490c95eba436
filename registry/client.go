package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	orasregistry "oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/errcode"
	"oras.land/oras-go/v2/registry/remote/retry"

	"github.com/berm-dev/berm/internal/httpbound"
	"github.com/berm-dev/berm/manifest"
)

// DefaultMaxImageSize is the largest program Pull, Inspect and Push accept
// when Config.MaxImageSize is zero. The same limit is meant for local deploys
// and the control API's bodies, so that what one path accepts the others do.
const DefaultMaxImageSize = manifest.DefaultMaxImage

// AnnotationABI is the key of the OCI manifest annotation holding the
// program's .berm.abi JSON, byte for byte. It is what the pusher claims: only
// the layer's own section binds, and Pull never reads the annotation.
const AnnotationABI = "dev.berm.abi"

// maxManifestSize bounds the manifest fetched before anything else; registries
// commonly refuse manifests over 4 MiB.
const maxManifestSize = 4 << 20

// Config is how a Client reaches registries. The zero value (or nil) is
// usable: Docker's credentials, HTTPS except for loopback, DefaultMaxImageSize.
type Config struct {
	// PlainHTTP reaches every registry over plain HTTP. Loopback registries
	// (localhost, 127.0.0.0/8, ::1) are always reached over plain HTTP.
	PlainHTTP bool
	// MaxImageSize is the largest layer pushed or pulled, in bytes; zero means
	// DefaultMaxImageSize.
	MaxImageSize int64
	// DockerConfig is the directory holding config.json; empty means
	// $DOCKER_CONFIG, or ~/.docker when that is unset.
	DockerConfig string
	// Progress, when set, receives a progress line, redrawn with \r, for
	// transfers of a few megabytes or more. Pass it only for a terminal.
	Progress io.Writer
	// HTTPClient sends the requests; nil means one that retries transient
	// failures (429 and 5xx) with backoff.
	HTTPClient *http.Client
	// UserAgent is sent with every request; empty means "berm".
	UserAgent string

	// RequestTimeout bounds each request to a registry (or its token
	// server), from dialling to the last byte of its body, retries
	// included; zero means DefaultRequestTimeout, negative none.
	RequestTimeout time.Duration
	// MinRate is the fewest bytes a second a request may move, sent and
	// received, averaged over each MinRateWindow of it; a request with no
	// answer for a window is below it. Zero means DefaultMinRate, negative
	// none.
	MinRate int64
	// MinRateWindow is the window MinRate is averaged over; zero means
	// DefaultMinRateWindow.
	MinRateWindow time.Duration
}

// Client pushes, pulls and inspects programs, and keeps registry credentials.
// It is safe for concurrent use.
type Client struct {
	plainHTTP bool
	maxSize   int64
	progress  io.Writer
	store     credentials.Store
	auth      *auth.Client
}

// New returns a Client for cfg, which may be nil. It reads the Docker config
// file once, here; a missing file is no error.
func New(cfg *Config) (*Client, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	if cfg.MaxImageSize < 0 {
		return nil, fmt.Errorf("max image size %d: must not be negative", cfg.MaxImageSize)
	}
	// As the oras CLI does: credentials go to the helper config.json names,
	// and into config.json itself only when it names none. No platform
	// helper is guessed, so a login never writes to a keychain the user did
	// not configure.
	opts := credentials.StoreOptions{AllowPlaintextPut: true}
	var store *credentials.DynamicStore
	var err error
	if cfg.DockerConfig != "" {
		store, err = credentials.NewStore(filepath.Join(cfg.DockerConfig, "config.json"), opts)
	} else {
		store, err = credentials.NewStoreFromDocker(opts)
	}
	if err != nil {
		return nil, fmt.Errorf("docker config: %w", err)
	}
	httpClient := cfg.HTTPClient
	if httpClient == nil {
		httpClient = retry.NewClient()
	}
	if b := newBounded(cfg); b != nil {
		// Outside the retries: a request's bound holds whatever it retries.
		hc := *httpClient
		b.Next = hc.Transport
		hc.Transport = b
		httpClient = &hc
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = "berm"
	}
	c := &Client{
		plainHTTP: cfg.PlainHTTP,
		maxSize:   cfg.MaxImageSize,
		progress:  cfg.Progress,
		store:     store,
		auth: &auth.Client{
			Client:     httpClient,
			Header:     http.Header{"User-Agent": {ua}},
			Credential: credentials.Credential(store),
			Cache:      auth.NewCache(),
		},
	}
	if c.maxSize == 0 {
		c.maxSize = DefaultMaxImageSize
	}
	return c, nil
}

// Image is a program as a registry holds it.
type Image struct {
	// Reference is the reference asked for, normalized (host/repo:tag, tag
	// "latest" when it had none, or host/repo@digest).
	Reference string
	// Resolved pins what was read or written: host/repo@<manifest digest>.
	Resolved string
	// ManifestDigest is the digest of the OCI manifest.
	ManifestDigest string
	// Digest is the digest of the single layer: the sha256 of the program's
	// bytes, its identity.
	Digest string
	// Size is the program's size in bytes.
	Size int64
	// Title is the file name the layer carries (org.opencontainers.image.title),
	// if any.
	Title string

	// Bytes is the program, set by Pull only; they hash to Digest.
	Bytes []byte
	// Cached is set by Pull when Bytes came from PullOptions.Have rather than
	// from the registry.
	Cached bool

	// ABI is the program's .berm.abi JSON, set by Inspect only.
	ABI json.RawMessage
	// Annotated is set by Inspect when ABI came from the manifest's
	// AnnotationABI, unchecked, rather than from the layer itself.
	Annotated bool
}

// newImage describes the image a push wrote or a pull resolved: name as
// asked for, pinned to the manifest desc, whose one layer is layer.
func newImage(name string, r orasregistry.Reference, desc, layer ocispec.Descriptor, title string) *Image {
	return &Image{
		Reference:      name,
		Resolved:       r.Registry + "/" + r.Repository + "@" + desc.Digest.String(),
		ManifestDigest: desc.Digest.String(),
		Digest:         layer.Digest.String(),
		Size:           layer.Size,
		Title:          title,
	}
}

// parseRef parses an OCI reference, defaulting the tag to "latest".
func parseRef(ref string) (orasregistry.Reference, error) {
	r, err := orasregistry.ParseReference(ref)
	if err != nil {
		return r, fmt.Errorf("%q: %w: %v", ref, ErrReference, stripInvalidReference(err))
	}
	if r.Reference == "" {
		r.Reference = "latest"
	}
	return r, nil
}

// stripInvalidReference drops oras-go's own "invalid reference: " prefix,
// which ErrReference already says.
func stripInvalidReference(err error) string {
	return strings.TrimPrefix(err.Error(), errdef.ErrInvalidReference.Error()+": ")
}

// repository returns the remote repository of r, reached with c's
// credentials.
func (c *Client) repository(r orasregistry.Reference) *remote.Repository {
	return &remote.Repository{
		Client:           c.auth,
		Reference:        r,
		PlainHTTP:        c.plainHTTP || isLoopback(r.Registry),
		MaxMetadataBytes: maxManifestSize,
		// berm never pushes a manifest with a subject.
		SkipReferrersGC: true,
	}
}

// isLoopback reports whether a registry (host or host:port) is on this
// machine: localhost, 127.0.0.0/8 or ::1. Those are reached over plain HTTP.
func isLoopback(registry string) bool {
	host := registry
	if h, _, err := net.SplitHostPort(registry); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	addr, err := netip.ParseAddr(host)
	return err == nil && addr.Unmap().IsLoopback()
}

// wrap turns an error from oras-go into one of this package's sentinels
// where one fits, naming the object (a reference, a registry).
func wrap(object string, err error) error {
	if err == nil {
		return nil
	}
	var resp *errcode.ErrorResponse
	var slow *httpbound.Error
	var dial *net.OpError
	switch {
	case errors.As(err, &slow):
		// Without the URL and oras-go's words around it: the bound and
		// the host say it all.
		return fmt.Errorf("%s: %w", object, slow)
	case errors.As(err, &dial) && dial.Op == "dial":
		return fmt.Errorf("%s: %w: %v", object, ErrUnreachable, dial)
	case errors.Is(err, errdef.ErrNotFound):
		return fmt.Errorf("%s: %w", object, ErrNotFound)
	case errors.Is(err, auth.ErrBasicCredentialNotFound):
		return fmt.Errorf("%s: no credentials: %w", object, ErrUnauthorized)
	case errors.As(err, &resp) && resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("%s: %w", object, ErrUnauthorized)
	case errors.As(err, &resp) && resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%s: access denied: %w", object, ErrUnauthorized)
	case errors.As(err, &resp) && resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%s: %w", object, ErrNotFound)
	case errors.Is(err, content.ErrMismatchedDigest), errors.Is(err, content.ErrTrailingData),
		errors.Is(err, content.ErrInvalidDescriptorSize):
		return fmt.Errorf("%s: %w", object, ErrDigest)
	case errors.Is(err, errdef.ErrSizeExceedsLimit):
		return fmt.Errorf("%s: %w", object, ErrTooLarge)
	}
	return fmt.Errorf("%s: %w", object, err)
}
