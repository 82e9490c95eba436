package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/berm-dev/berm/manifest"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
)

// Media types of the CNCF TAG Runtime wasm OCI artifact layout, which Push
// writes, and of the other single-layer wasm layouts Pull accepts.
const (
	mediaTypeWasm       = "application/wasm"
	mediaTypeWasmConfig = "application/vnd.wasm.config.v0+json"
	// The layout of berm's first releases: layer and artifact type alike.
	mediaTypeBermHarness = "application/vnd.berm.harness.v1"
	// Spin's, and Istio's / solo.io's wasm image layout.
	mediaTypeSpinWasm   = "application/vnd.wasm.content.layer.v1+wasm"
	mediaTypeModuleWasm = "application/vnd.module.wasm.content.layer.v1+wasm"

	// wasip1 names a core module in the layout's "os" field; wasip2 is for
	// components, which berm does not run.
	wasmArchitecture = "wasm"
	wasmOSModule     = "wasip1"
)

// maxAnnotationSize bounds the .berm.abi JSON copied into the manifest. Past
// it the annotation is left out (registries refuse large manifests) and
// Inspect falls back to reading the layer.
const maxAnnotationSize = 256 << 10

// wasmConfig is the config blob of the wasm OCI artifact layout.
// LayerDigests makes the config, and so the manifest, unique to the layer.
type wasmConfig struct {
	Created      string   `json:"created"`
	Architecture string   `json:"architecture"`
	OS           string   `json:"os"`
	LayerDigests []string `json:"layerDigests"`
}

// PushOptions tune Push; nil means the defaults.
type PushOptions struct {
	// Title is the file name `oras pull` writes the layer to; empty means the
	// last element of the repository with ".wasm".
	Title string
	// Created is the creation time recorded in the manifest and config. The
	// zero value means the Unix epoch, so that pushing the same file to the
	// same reference twice gives the same manifest digest.
	Created time.Time
}

// Push publishes image, a berm program, to ref (host/repo:tag; tag "latest"
// when it has none) as one OCI image manifest with image as its only layer.
// It refuses what manifest.Read refuses, and an image over the size limit. A
// blob the repository already holds is not uploaded again.
func (c *Client) Push(ctx context.Context, ref string, image []byte, opts *PushOptions) (*Image, error) {
	if opts == nil {
		opts = &PushOptions{}
	}
	r, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	name := r.String()
	if _, err := r.Digest(); err == nil {
		return nil, fmt.Errorf("%s: %w: push needs a tag, not a digest", name, ErrReference)
	}
	if int64(len(image)) > c.maxSize {
		return nil, fmt.Errorf("%s: image of %d bytes, limit %d: %w", name, len(image), c.maxSize, ErrTooLarge)
	}
	m, err := manifest.Read(image)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}

	created := opts.Created
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	createdText := created.UTC().Format(time.RFC3339)
	title := opts.Title
	if title == "" {
		title = path.Base(r.Repository) + ".wasm"
	}
	layer := ocispec.Descriptor{
		MediaType:   mediaTypeWasm,
		Digest:      digest.FromBytes(image),
		Size:        int64(len(image)),
		Annotations: map[string]string{ocispec.AnnotationTitle: title},
	}
	configJSON, err := json.Marshal(wasmConfig{
		Created:      createdText,
		Architecture: wasmArchitecture,
		OS:           wasmOSModule,
		LayerDigests: []string{layer.Digest.String()},
	})
	if err != nil {
		return nil, err
	}
	config := content.NewDescriptorFromBytes(mediaTypeWasmConfig, configJSON)

	repo := c.repository(r)
	// The two blobs go up side by side, as oras copies concurrently.
	pushCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 2)
	go func() { errs <- pushBlob(pushCtx, repo, config, configJSON, nil) }()
	go func() { errs <- pushBlob(pushCtx, repo, layer, image, c.progressFor(name, layer.Size)) }()
	for range 2 {
		if e := <-errs; e != nil && err == nil {
			err = e
			cancel()
		}
	}
	if err != nil {
		return nil, wrap(name, err)
	}

	annotations := map[string]string{ocispec.AnnotationCreated: createdText}
	if len(m.Raw) <= maxAnnotationSize {
		annotations[AnnotationABI] = string(m.Raw)
	}
	desc, err := oras.PackManifest(ctx, tagPusher{repo, r.Reference}, oras.PackManifestVersion1_1, "",
		oras.PackManifestOptions{
			Layers:              []ocispec.Descriptor{layer},
			ConfigDescriptor:    &config,
			ManifestAnnotations: annotations,
		})
	if err != nil {
		return nil, wrap(name, err)
	}
	return newImage(name, r, desc, layer, title), nil
}

// pushBlob uploads data unless the repository already has it.
func pushBlob(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor, data []byte, progress *progress) error {
	blobs := repo.Blobs()
	if ok, err := blobs.Exists(ctx, desc); err != nil {
		return err
	} else if ok {
		return nil
	}
	var r io.Reader = bytes.NewReader(data)
	if progress != nil {
		r = progress.reader(r)
		defer progress.done()
	}
	if err := blobs.Push(ctx, desc, r); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
		return err
	}
	return nil
}

// tagPusher pushes the manifest PackManifest packs under a tag, in the same
// request that uploads it.
type tagPusher struct {
	repo *remote.Repository
	tag  string
}

func (p tagPusher) Push(ctx context.Context, desc ocispec.Descriptor, r io.Reader) error {
	return p.repo.PushReference(ctx, desc, r, p.tag)
}
