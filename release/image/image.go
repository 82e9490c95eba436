package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// The image's fixed parts. The user is numeric so that a runtime can tell it
// is not root without reading /etc/passwd (Kubernetes' runAsNonRoot).
const (
	uid        = 65532
	binaryPath = "usr/local/bin/berm"
	dataDir    = "data"
	caPath     = "etc/ssl/certs/ca-certificates.crt"
	listenAddr = "0.0.0.0:7777"
)

// spec is what an image is built from.
type spec struct {
	// Binaries are the static linux binaries by GOARCH (amd64, arm64).
	Binaries map[string]string
	// CACerts is a PEM bundle of the roots registry pulls trust.
	CACerts []byte
	// Version, Revision and Source go into the OCI annotations and labels.
	Version, Revision, Source string
	// Created stamps the config, the history and every file in the layer:
	// the commit's time, so that one commit gives one digest.
	Created time.Time
}

// image is a built multi-platform image: its index and every blob by digest.
type image struct {
	Index ocispec.Descriptor
	Blobs map[digest.Digest][]byte
	// Manifests are the index's entries, by GOARCH.
	Manifests map[string]ocispec.Descriptor
}

func build(s spec) (*image, error) {
	im := &image{Blobs: map[digest.Digest][]byte{}, Manifests: map[string]ocispec.Descriptor{}}
	arches := make([]string, 0, len(s.Binaries))
	for arch := range s.Binaries {
		arches = append(arches, arch)
	}
	sort.Strings(arches)
	var entries []ocispec.Descriptor
	for _, arch := range arches {
		bin, err := os.ReadFile(s.Binaries[arch])
		if err != nil {
			return nil, err
		}
		desc, err := im.platform(s, arch, bin)
		if err != nil {
			return nil, fmt.Errorf("linux/%s: %w", arch, err)
		}
		im.Manifests[arch] = desc
		entries = append(entries, desc)
	}
	index := ocispec.Index{
		Versioned:   specs.Versioned{SchemaVersion: 2},
		MediaType:   ocispec.MediaTypeImageIndex,
		Manifests:   entries,
		Annotations: s.annotations(),
	}
	desc, err := im.add(ocispec.MediaTypeImageIndex, index)
	if err != nil {
		return nil, err
	}
	im.Index = desc
	return im, nil
}

func (s spec) annotations() map[string]string {
	return map[string]string{
		ocispec.AnnotationCreated:  s.Created.UTC().Format(time.RFC3339),
		ocispec.AnnotationVersion:  s.Version,
		ocispec.AnnotationRevision: s.Revision,
		ocispec.AnnotationSource:   s.Source,
		ocispec.AnnotationTitle:    "berm",
		ocispec.AnnotationLicenses: "Apache-2.0",
	}
}

// platform adds one platform's layer, config and manifest.
func (im *image) platform(s spec, arch string, bin []byte) (ocispec.Descriptor, error) {
	layer, diffID, err := rootfs(s, bin)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	layerDesc := im.addBlob(ocispec.MediaTypeImageLayerGzip, layer)
	created := s.Created.UTC()
	config := ocispec.Image{
		Created:  &created,
		Platform: ocispec.Platform{OS: "linux", Architecture: arch},
		Config: ocispec.ImageConfig{
			User:         fmt.Sprintf("%d:%d", uid, uid),
			Entrypoint:   []string{"/" + binaryPath, "serve"},
			Env:          []string{"PATH=/usr/local/bin", "BERM_ROOT=/" + dataDir, "BERM_ADDR=" + listenAddr},
			ExposedPorts: map[string]struct{}{"7777/tcp": {}},
			Volumes:      map[string]struct{}{"/" + dataDir: {}},
			WorkingDir:   "/" + dataDir,
			Labels:       s.annotations(),
		},
		RootFS:  ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{diffID}},
		History: []ocispec.History{{Created: &created, CreatedBy: "berm release/image"}},
	}
	configDesc, err := im.add(ocispec.MediaTypeImageConfig, config)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	manifest := ocispec.Manifest{
		Versioned:   specs.Versioned{SchemaVersion: 2},
		MediaType:   ocispec.MediaTypeImageManifest,
		Config:      configDesc,
		Layers:      []ocispec.Descriptor{layerDesc},
		Annotations: s.annotations(),
	}
	desc, err := im.add(ocispec.MediaTypeImageManifest, manifest)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	desc.Platform = &ocispec.Platform{OS: "linux", Architecture: arch}
	return desc, nil
}

func (im *image) add(mediaType string, v any) (ocispec.Descriptor, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	return im.addBlob(mediaType, b), nil
}

func (im *image) addBlob(mediaType string, b []byte) ocispec.Descriptor {
	d := digest.FromBytes(b)
	im.Blobs[d] = b
	return ocispec.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(b))}
}

// rootfs is the one layer: the binary, the CA roots, a passwd and group
// naming the user, a /tmp, and the data directory owned by the user, which a
// runtime copies into a new volume mounted there so that the user can write
// it. It returns the gzipped tar and the digest of the tar (the diff ID).
// Every entry has the same time and numeric owners; Go's gzip writes no
// name or time into its header, so the bytes depend only on the inputs (and
// on the Go release's compressor).
func rootfs(s spec, bin []byte) (gz []byte, diffID digest.Digest, err error) {
	type entry struct {
		name string
		mode int64
		uid  int
		body []byte
		dir  bool
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nberm:x:%d:%d:berm:/%s:/sbin/nologin\n", uid, uid, dataDir)
	group := fmt.Sprintf("root:x:0:\nberm:x:%d:\n", uid)
	entries := []entry{
		{name: dataDir + "/", mode: 0o755, uid: uid, dir: true},
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, body: []byte(group)},
		{name: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: caPath, mode: 0o644, body: s.CACerts},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: "usr/local/bin/", mode: 0o755, dir: true},
		{name: binaryPath, mode: 0o755, body: bin},
	}
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.uid,
			ModTime: s.Created.UTC().Truncate(time.Second),
			Size:    int64(len(e.body)),
		}
		h.Typeflag = tar.TypeReg
		if e.dir {
			h.Typeflag = tar.TypeDir
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, "", err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, "", err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.BestCompression)
	if err != nil {
		return nil, "", err
	}
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return out.Bytes(), digest.FromBytes(raw.Bytes()), nil
}

// writeLayout writes the image as an OCI image layout in dir, the index
// tagged with tag.
func (im *image) writeLayout(dir, tag string) error {
	blobs := filepath.Join(dir, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return err
	}
	for d, b := range im.Blobs {
		if err := os.WriteFile(filepath.Join(blobs, d.Encoded()), b, 0o644); err != nil {
			return err
		}
	}
	layout, _ := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	if err := os.WriteFile(filepath.Join(dir, ocispec.ImageLayoutFile), layout, 0o644); err != nil {
		return err
	}
	top := im.Index
	top.Annotations = map[string]string{ocispec.AnnotationRefName: tag}
	index, _ := json.Marshal(ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{top},
	})
	return os.WriteFile(filepath.Join(dir, "index.json"), index, 0o644)
}

// push uploads every blob the registry lacks, the manifests, and then the
// index under ref's tag, with Docker's credentials; loopback registries over
// plain HTTP.
func (im *image) push(ctx context.Context, ref string) error {
	repo, err := remote.NewRepository(ref)
	if err != nil {
		return err
	}
	repo.PlainHTTP = isLoopback(repo.Reference.Registry)
	store, err := credentials.NewStoreFromDocker(credentials.StoreOptions{})
	if err != nil {
		return err
	}
	repo.Client = &auth.Client{Client: retry.DefaultClient, Cache: auth.NewCache(), Credential: credentials.Credential(store)}
	for _, arch := range sortedKeys(im.Manifests) {
		m := im.Manifests[arch]
		var manifest ocispec.Manifest
		if err := json.Unmarshal(im.Blobs[m.Digest], &manifest); err != nil {
			return err
		}
		for _, b := range append([]ocispec.Descriptor{manifest.Config}, manifest.Layers...) {
			if err := pushBlob(ctx, repo, b, im.Blobs[b.Digest]); err != nil {
				return err
			}
		}
		if err := repo.Manifests().Push(ctx, m, bytes.NewReader(im.Blobs[m.Digest])); err != nil && !isExists(err) {
			return fmt.Errorf("manifest linux/%s: %w", arch, err)
		}
	}
	tag := repo.Reference.Reference
	if tag == "" {
		tag = im.Index.Digest.String()
	}
	return repo.Manifests().PushReference(ctx, im.Index, bytes.NewReader(im.Blobs[im.Index.Digest]), tag)
}

func pushBlob(ctx context.Context, repo *remote.Repository, d ocispec.Descriptor, b []byte) error {
	if ok, err := repo.Blobs().Exists(ctx, d); err == nil && ok {
		return nil
	}
	if err := repo.Blobs().Push(ctx, d, bytes.NewReader(b)); err != nil && !isExists(err) {
		return fmt.Errorf("blob %s: %w", d.Digest, err)
	}
	return nil
}

func isExists(err error) bool { return err != nil && errors.Is(err, errdef.ErrAlreadyExists) }

// isLoopback reports whether host (a registry's host[:port]) is on this
// machine, which berm's own registry client reaches over plain HTTP too.
func isLoopback(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
