package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/x509"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/berm-dev/berm/internal/registrytest"
)

// fakeSpec is a spec over two small files standing in for the binaries.
func fakeSpec(t *testing.T, created time.Time) spec {
	dir := t.TempDir()
	s := spec{Binaries: map[string]string{}, CACerts: []byte("roots\n"), Version: "v1.2.3", Revision: "abc", Source: "https://example.com/berm", Created: created}
	for _, arch := range []string{"amd64", "arm64"} {
		p := filepath.Join(dir, arch)
		if err := os.WriteFile(p, []byte("binary for "+arch), 0o755); err != nil {
			t.Fatal(err)
		}
		s.Binaries[arch] = p
	}
	return s
}

func mustBuild(t *testing.T, s spec) *image {
	t.Helper()
	im, err := build(s)
	if err != nil {
		t.Fatal(err)
	}
	return im
}

// TestBuildReproducible: the same inputs give the same index digest; the
// commit's time is the only clock in it.
func TestBuildReproducible(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a, b := mustBuild(t, fakeSpec(t, at)), mustBuild(t, fakeSpec(t, at))
	if a.Index.Digest != b.Index.Digest {
		t.Errorf("two builds of the same inputs: %s and %s", a.Index.Digest, b.Index.Digest)
	}
	if c := mustBuild(t, fakeSpec(t, at.Add(time.Second))); c.Index.Digest == a.Index.Digest {
		t.Errorf("another commit time gave the same digest %s", c.Index.Digest)
	}
}

// TestBuildLayout: what a runtime reads from the image. The user is numeric
// and not root, serve is the entry point on all interfaces with its root at
// the volume, and the volume's directory belongs to the user.
func TestBuildLayout(t *testing.T) {
	im := mustBuild(t, fakeSpec(t, time.Unix(1700000000, 0)))
	var index ocispec.Index
	mustUnmarshal(t, im.Blobs[im.Index.Digest], &index)
	var platforms []string
	for _, m := range index.Manifests {
		platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Fatalf("index platforms %v, want %v", platforms, want)
	}
	blob := func(d ocispec.Descriptor) []byte { return im.Blobs[d.Digest] }
	config, files := readImage(t, blob, im.Manifests["arm64"])
	checkConfig(t, config)
	if got := string(files[binaryPath].body); got != "binary for arm64" {
		t.Errorf("%s holds %q", binaryPath, got)
	}
	for name, want := range map[string]struct {
		mode int64
		uid  int
	}{binaryPath: {0o755, 0}, dataDir + "/": {0o755, uid}, "tmp/": {0o1777, 0}, caPath: {0o644, 0}} {
		h := files[name].header
		if h == nil || h.Mode != want.mode || h.Uid != want.uid {
			t.Errorf("%s: header %+v, want mode %o uid %d", name, h, want.mode, want.uid)
		}
	}
	if !strings.Contains(string(files["etc/passwd"].body), "berm:x:65532:65532:") {
		t.Errorf("/etc/passwd lacks the user: %q", files["etc/passwd"].body)
	}
}

// TestReleaseImage takes the image that make release-snapshot wrote into
// the release (BERM_RELEASE_DIST/image), pushes it to a loopback registry,
// pulls it back by digest, and runs the linux/amd64 binary from its layer: it
// must answer berm version with the release's version and commit.
func TestReleaseImage(t *testing.T) {
	dist := os.Getenv("BERM_RELEASE_DIST")
	if dist == "" {
		t.Skip("BERM_RELEASE_DIST unset: make release-test builds a release and sets it")
	}
	host := registrytest.Start(t, nil)
	s, err := specFromDist(dist)
	if err != nil {
		t.Fatal(err)
	}
	im := readLayout(t, filepath.Join(dist, "image"))
	ctx := context.Background()
	if err := im.push(ctx, host+"/berm:release"); err != nil {
		t.Fatal(err)
	}

	// Pull back by digest: everything below comes from the registry.
	repo, err := remote.NewRepository(host + "/berm")
	if err != nil {
		t.Fatal(err)
	}
	repo.PlainHTTP = true
	pull := func(d ocispec.Descriptor) []byte {
		b, err := content.FetchAll(ctx, repo, d) // verifies the digest
		if err != nil {
			t.Fatalf("pull %s: %v", d.Digest, err)
		}
		return b
	}
	desc, err := repo.Resolve(ctx, im.Index.Digest.String())
	if err != nil {
		t.Fatal(err)
	}
	var index ocispec.Index
	mustUnmarshal(t, pull(desc), &index)
	if v := index.Annotations[ocispec.AnnotationVersion]; v != s.Version {
		t.Errorf("the index's version annotation %q, want %q", v, s.Version)
	}
	var amd64 ocispec.Descriptor
	for _, m := range index.Manifests {
		if m.Platform != nil && m.Platform.Architecture == "amd64" && m.Platform.OS == "linux" {
			amd64 = m
		}
	}
	if amd64.Digest == "" {
		t.Fatalf("index %s has no linux/amd64 manifest", desc.Digest)
	}
	config, files := readImage(t, pull, amd64)
	checkConfig(t, config)
	if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(files[caPath].body) {
		t.Errorf("%s holds no certificates", caPath)
	}
	t.Logf("index %s; linux/amd64 layer %d bytes", im.Index.Digest, mustManifest(t, im.Blobs[amd64.Digest]).Layers[0].Size)

	bin := filepath.Join(t.TempDir(), "berm")
	if err := os.WriteFile(bin, files[binaryPath].body, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("berm version from the image: %v", err)
	}
	var v struct{ Version, Commit string }
	mustUnmarshal(t, out, &v)
	if v.Version != s.Version || v.Commit != s.Revision {
		t.Errorf("berm version in the image: %s at %s, want %s at %s", v.Version, v.Commit, s.Version, s.Revision)
	}
}

func checkConfig(t *testing.T, config ocispec.Image) {
	t.Helper()
	c := config.Config
	if u, _, _ := strings.Cut(c.User, ":"); u == "" || u == "0" || u == "root" {
		t.Errorf("user %q: want a non-root numeric user", c.User)
	} else if _, err := strconv.Atoi(u); err != nil {
		t.Errorf("user %q: want it numeric", c.User)
	}
	if want := []string{"/usr/local/bin/berm", "serve"}; !slices.Equal(c.Entrypoint, want) {
		t.Errorf("entry point %q, want %q", c.Entrypoint, want)
	}
	for _, env := range []string{"BERM_ROOT=/data", "BERM_ADDR=0.0.0.0:7777"} {
		if !slices.Contains(c.Env, env) {
			t.Errorf("env %q lacks %s", c.Env, env)
		}
	}
	if _, ok := c.Volumes["/data"]; !ok {
		t.Errorf("volumes %v lack /data", c.Volumes)
	}
}

// readLayout reads the OCI image layout that writeLayout wrote, checking
// every blob against its digest.
func readLayout(t *testing.T, dir string) *image {
	t.Helper()
	im := &image{Blobs: map[digest.Digest][]byte{}, Manifests: map[string]ocispec.Descriptor{}}
	blob := func(d ocispec.Descriptor) []byte {
		b, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", d.Digest.Encoded()))
		if err != nil {
			t.Fatal(err)
		}
		if digest.FromBytes(b) != d.Digest {
			t.Fatalf("layout blob %s does not match its digest", d.Digest)
		}
		im.Blobs[d.Digest] = b
		return b
	}
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var top ocispec.Index
	mustUnmarshal(t, b, &top)
	if len(top.Manifests) != 1 {
		t.Fatalf("%s/index.json: %d entries, want 1", dir, len(top.Manifests))
	}
	im.Index = top.Manifests[0]
	im.Index.Annotations = nil
	var index ocispec.Index
	mustUnmarshal(t, blob(im.Index), &index)
	for _, m := range index.Manifests {
		im.Manifests[m.Platform.Architecture] = m
		manifest := mustManifest(t, blob(m))
		blob(manifest.Config)
		for _, l := range manifest.Layers {
			blob(l)
		}
	}
	return im
}

type file struct {
	header *tar.Header
	body   []byte
}

// readImage reads a platform's config and its one layer's files through
// fetch.
func readImage(t *testing.T, fetch func(ocispec.Descriptor) []byte, m ocispec.Descriptor) (ocispec.Image, map[string]file) {
	t.Helper()
	manifest := mustManifest(t, fetch(m))
	var config ocispec.Image
	mustUnmarshal(t, fetch(manifest.Config), &config)
	if len(manifest.Layers) != 1 {
		t.Fatalf("%d layers, want 1", len(manifest.Layers))
	}
	zr, err := gzip.NewReader(bytes.NewReader(fetch(manifest.Layers[0])))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]file{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = file{h, body}
	}
	return config, files
}

func mustManifest(t *testing.T, b []byte) ocispec.Manifest {
	t.Helper()
	var m ocispec.Manifest
	mustUnmarshal(t, b, &m)
	return m
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}
