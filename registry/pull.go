package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	orasregistry "oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/berm-dev/berm/internal/wasmbin"
	"github.com/berm-dev/berm/manifest"
)

// Manifest media types of Docker's registry API, beside the OCI ones.
const (
	mediaTypeDockerManifest     = "application/vnd.docker.distribution.manifest.v2+json"
	mediaTypeDockerManifestList = "application/vnd.docker.distribution.manifest.list.v2+json"
)

// wasmLayerTypes are the layer media types of the single-layer wasm layouts
// Pull accepts: the CNCF TAG Runtime one (and `oras push ref f.wasm:application/wasm`),
// berm's first, Spin's, and Istio's.
var wasmLayerTypes = map[string]bool{
	mediaTypeWasm:        true,
	mediaTypeBermHarness: true,
	mediaTypeSpinWasm:    true,
	mediaTypeModuleWasm:  true,
}

// PullOptions tune Pull; nil means the defaults.
type PullOptions struct {
	// Have returns the bytes of a program already held, by its digest
	// ("sha256:<hex>"), so that it is not fetched again. Pull checks them
	// against the digest all the same.
	Have func(digest string) ([]byte, bool)
}

// Pull fetches the program ref names (host/repo:tag, tag "latest" when it has
// none, or host/repo@sha256:...). It accepts an image manifest with exactly
// one layer of a wasm media type, within the size limit, and checks the
// manifest and the layer against their digests: on any mismatch it returns
// ErrDigest and no bytes.
func (c *Client) Pull(ctx context.Context, ref string, opts *PullOptions) (*Image, error) {
	if opts == nil {
		opts = &PullOptions{}
	}
	r, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	repo := c.repository(r)
	img, layer, _, err := c.resolve(ctx, repo, r)
	if err != nil {
		return nil, err
	}
	if opts.Have != nil {
		if held, ok := opts.Have(img.Digest); ok {
			if digest.FromBytes(held) != layer.Digest {
				return nil, fmt.Errorf("%s: held bytes of %s: %w", img.Reference, img.Digest, ErrDigest)
			}
			img.Bytes, img.Cached = held, true
			return img, nil
		}
	}
	if img.Bytes, err = c.fetchLayer(ctx, repo, layer, img.Reference); err != nil {
		return nil, err
	}
	return img, nil
}

// Inspect returns what ref says of its program, ABI set to the .berm.abi
// JSON, reading the manifest's AnnotationABI and not fetching the layer. For
// an image without the annotation it fetches the layer, checked as Pull
// checks it, and reads its .berm.abi section, which must pass manifest.Read.
func (c *Client) Inspect(ctx context.Context, ref string) (*Image, error) {
	r, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	repo := c.repository(r)
	img, layer, annotations, err := c.resolve(ctx, repo, r)
	if err != nil {
		return nil, err
	}
	if abi, ok := annotations[AnnotationABI]; ok && json.Valid([]byte(abi)) {
		img.ABI, img.Annotated = json.RawMessage(abi), true
		return img, nil
	}
	b, err := c.fetchLayer(ctx, repo, layer, img.Reference)
	if err != nil {
		return nil, err
	}
	m, err := manifest.Read(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", img.Reference, err)
	}
	img.ABI = m.Raw
	return img, nil
}

// resolve fetches and checks the manifest ref names, returning the image it
// describes (without bytes), its layer and the manifest's annotations.
func (c *Client) resolve(ctx context.Context, repo *remote.Repository, r orasregistry.Reference) (*Image, ocispec.Descriptor, map[string]string, error) {
	name := r.String()
	desc, rc, err := repo.FetchReference(ctx, r.Reference)
	if err != nil {
		return nil, ocispec.Descriptor{}, nil, wrap(name, err)
	}
	defer rc.Close()
	if desc.Size > maxManifestSize {
		return nil, ocispec.Descriptor{}, nil, fmt.Errorf("%s: manifest of %d bytes: %w", name, desc.Size, ErrTooLarge)
	}
	// ReadAll checks the size and the digest: the one asked for, or for a tag
	// the one the registry names in Docker-Content-Digest.
	raw, err := content.ReadAll(rc, desc)
	if err != nil {
		return nil, ocispec.Descriptor{}, nil, wrap(name+": manifest", err)
	}
	m, err := checkManifest(desc.MediaType, raw, c.maxSize)
	if err != nil {
		return nil, ocispec.Descriptor{}, nil, fmt.Errorf("%s: %w", name, err)
	}
	layer := m.Layers[0]
	return newImage(name, r, desc, layer, layer.Annotations[ocispec.AnnotationTitle]), layer, m.Annotations, nil
}

// checkManifest checks that raw, a manifest served as mediaType, describes a
// single wasm layer of at most maxSize bytes, with a sha256 digest.
func checkManifest(mediaType string, raw []byte, maxSize int64) (*ocispec.Manifest, error) {
	var m struct {
		ocispec.Manifest
		Manifests json.RawMessage `json:"manifests"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("manifest: %w: not JSON", ErrManifest)
	}
	if m.MediaType != "" {
		// The manifest's own word wins over the Content-Type it was served with.
		mediaType = m.MediaType
	}
	switch {
	case mediaType == ocispec.MediaTypeImageIndex, mediaType == mediaTypeDockerManifestList, m.Manifests != nil:
		return nil, ErrIndex
	case mediaType != ocispec.MediaTypeImageManifest && mediaType != mediaTypeDockerManifest:
		return nil, fmt.Errorf("manifest of type %q: %w", mediaType, ErrManifest)
	case m.SchemaVersion != 2:
		return nil, fmt.Errorf("manifest schema version %d: %w", m.SchemaVersion, ErrManifest)
	case len(m.Layers) != 1:
		return nil, fmt.Errorf("%d layers: %w", len(m.Layers), ErrLayers)
	}
	layer := m.Layers[0]
	switch {
	case !wasmLayerTypes[layer.MediaType]:
		return nil, fmt.Errorf("layer of type %q: %w", layer.MediaType, ErrNotWasm)
	case layer.Digest.Validate() != nil || layer.Digest.Algorithm() != digest.SHA256:
		return nil, fmt.Errorf("layer digest %q: %w: not a sha256 digest", layer.Digest, ErrDigest)
	case layer.Size > maxSize:
		return nil, fmt.Errorf("layer of %d bytes, limit %d: %w", layer.Size, maxSize, ErrTooLarge)
	case layer.Size < int64(len(wasmbin.Magic)):
		return nil, fmt.Errorf("layer of %d bytes: %w", layer.Size, ErrNotWasm)
	}
	return &m.Manifest, nil
}

// fetchLayer downloads layer, at most its declared size, and checks it
// against its digest.
func (c *Client) fetchLayer(ctx context.Context, repo *remote.Repository, layer ocispec.Descriptor, name string) ([]byte, error) {
	rc, err := repo.Blobs().Fetch(ctx, layer)
	if err != nil {
		return nil, wrap(name+": layer", err)
	}
	defer rc.Close()
	var r io.Reader = rc
	if p := c.progressFor(name, layer.Size); p != nil {
		r = p.reader(r)
		defer p.done()
	}
	// layer.Size is within the limit, checked with the manifest. The bytes
	// are hashed as they arrive.
	b := make([]byte, layer.Size)
	h := sha256.New()
	if _, err := io.ReadFull(io.TeeReader(r, h), b); err != nil {
		return nil, fmt.Errorf("%s: layer: %w", name, err)
	}
	if n, _ := r.Read(make([]byte, 1)); n > 0 {
		return nil, fmt.Errorf("%s: layer: more bytes than its size: %w", name, ErrDigest)
	}
	if digest.NewDigest(digest.SHA256, h) != layer.Digest {
		return nil, fmt.Errorf("%s: layer %s: %w", name, layer.Digest, ErrDigest)
	}
	if !bytes.HasPrefix(b, []byte(wasmbin.Magic)) {
		return nil, fmt.Errorf("%s: layer without the WebAssembly magic: %w", name, ErrNotWasm)
	}
	return b, nil
}
