package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/berm-dev/berm/manifest"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
)

func TestPull(t *testing.T) {
	host := startRegistry(t, registryOptions{})
	c := newClient(t, nil)
	image := padded(readEcho(t), 100<<10, 2)
	pushed, err := c.Push(t.Context(), host+"/berm/echo:v1", image, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, ref, reference string }{
		{"tag", host + "/berm/echo:v1", host + "/berm/echo:v1"},
		{"digest", pushed.Resolved, pushed.Resolved},
		{"tag and digest", host + "/berm/echo:ignored@" + pushed.ManifestDigest, pushed.Resolved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.Pull(t.Context(), tc.ref, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes, image) {
				t.Error("pulled bytes differ from those pushed")
			}
			if got.Reference != tc.reference || got.Resolved != pushed.Resolved ||
				got.ManifestDigest != pushed.ManifestDigest || got.Digest != pushed.Digest ||
				got.Size != int64(len(image)) || got.Title != "echo.wasm" || got.Cached || got.ABI != nil {
				t.Errorf("Pull = %+v, pushed %+v", got, pushed)
			}
		})
	}
}

func TestPullDefaultTag(t *testing.T) {
	host := startRegistry(t, registryOptions{})
	c := newClient(t, nil)
	pushed, err := c.Push(t.Context(), host+"/berm/echo", readEcho(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if pushed.Reference != host+"/berm/echo:latest" {
		t.Errorf("Push reference = %q, want tag latest", pushed.Reference)
	}
	got, err := c.Pull(t.Context(), host+"/berm/echo:latest", nil)
	if err != nil || got.ManifestDigest != pushed.ManifestDigest {
		t.Fatalf("Pull :latest = %v, %v", got, err)
	}
}

// What `oras push ref f.wasm:application/wasm` pushes, Pull returns byte for
// byte, and Inspect reads from the layer, there being no annotation.
func TestPullOrasPush(t *testing.T) {
	orasBin(t) // skip or fail before starting a registry
	host := startRegistry(t, registryOptions{})
	c := newClient(t, nil)
	image := padded(readEcho(t), 300<<10, 3)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.wasm"), image, 0o644); err != nil {
		t.Fatal(err)
	}
	ref := host + "/oras/f:v1"
	runOras(t, dir, "push", "--plain-http", ref, "f.wasm:application/wasm")

	got, err := c.Pull(t.Context(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes, image) || got.Digest != digest.FromBytes(image).String() || got.Title != "f.wasm" {
		t.Errorf("Pull = %s (%s), want the bytes oras pushed", got.Digest, got.Title)
	}

	info, err := c.Inspect(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Read(image)
	if err != nil {
		t.Fatal(err)
	}
	if info.Annotated || !bytes.Equal(info.ABI, m.Raw) {
		t.Errorf("Inspect = %s (annotated %v), want the layer's .berm.abi", info.ABI, info.Annotated)
	}
}

// blob is one blob of a crafted image.
type blob struct {
	mediaType string
	data      []byte
}

// pushRaw pushes blobs and then manifest, as given, under tag: images berm
// would never push, to check what Pull makes of them.
func pushRaw(t *testing.T, host, repo, tag string, blobs []blob, manifest any) {
	t.Helper()
	r, err := remote.NewRepository(host + "/" + repo)
	if err != nil {
		t.Fatal(err)
	}
	r.PlainHTTP = true
	for _, b := range blobs {
		desc := content.NewDescriptorFromBytes(b.mediaType, b.data)
		if err := r.Push(t.Context(), desc, bytes.NewReader(b.data)); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := json.Marshal(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var probe struct{ MediaType string }
	json.Unmarshal(raw, &probe)
	desc := content.NewDescriptorFromBytes(probe.MediaType, raw)
	if err := r.PushReference(t.Context(), desc, bytes.NewReader(raw), tag); err != nil {
		t.Fatal(err)
	}
}

// imageManifest returns an image manifest of config and layers.
func imageManifest(mediaType, artifactType string, config blob, layers ...blob) map[string]any {
	m := map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaType,
		"config":        content.NewDescriptorFromBytes(config.mediaType, config.data),
	}
	if artifactType != "" {
		m["artifactType"] = artifactType
	}
	descs := []ocispec.Descriptor{}
	for _, l := range layers {
		descs = append(descs, content.NewDescriptorFromBytes(l.mediaType, l.data))
	}
	m["layers"] = descs
	return m
}

// TestPullLayouts crafts single-layer wasm images in the layouts other tools
// push, and images Pull must refuse.
func TestPullLayouts(t *testing.T) {
	host := startRegistry(t, registryOptions{})
	image := readEcho(t)
	empty := blob{ocispec.MediaTypeEmptyJSON, []byte("{}")}
	wasmConfig := blob{mediaTypeWasmConfig, fmt.Appendf(nil,
		`{"created":"2024-01-01T00:00:00Z","architecture":"wasm","os":"wasip1","layerDigests":[%q]}`, digest.FromBytes(image))}
	spinConfig := blob{"application/vnd.fermyon.spin.application.v1+config", []byte(`{"spin_manifest_version":2}`)}
	dockerConfig := blob{"application/vnd.docker.container.image.v1+json", []byte(`{"architecture":"wasm","os":"wasip1"}`)}
	layer := func(mediaType string) blob { return blob{mediaType, image} }
	big := padded(image, 4096, 4)

	for _, tc := range []struct {
		name     string
		blobs    []blob
		manifest any
		max      int64
		want     error
		bytes    []byte
	}{
		{name: "wasm oci artifact",
			blobs:    []blob{wasmConfig, layer(mediaTypeWasm)},
			manifest: imageManifest(ocispec.MediaTypeImageManifest, "", wasmConfig, layer(mediaTypeWasm))},
		{name: "berm harness v1",
			blobs:    []blob{empty, layer(mediaTypeBermHarness)},
			manifest: imageManifest(ocispec.MediaTypeImageManifest, mediaTypeBermHarness, empty, layer(mediaTypeBermHarness))},
		{name: "spin",
			blobs:    []blob{spinConfig, layer(mediaTypeSpinWasm)},
			manifest: imageManifest(ocispec.MediaTypeImageManifest, "", spinConfig, layer(mediaTypeSpinWasm))},
		{name: "istio",
			blobs:    []blob{empty, layer(mediaTypeModuleWasm)},
			manifest: imageManifest(ocispec.MediaTypeImageManifest, "", empty, layer(mediaTypeModuleWasm))},
		{name: "oras artifact",
			blobs:    []blob{empty, layer(mediaTypeWasm)},
			manifest: imageManifest(ocispec.MediaTypeImageManifest, "application/vnd.unknown.artifact.v1", empty, layer(mediaTypeWasm))},
		{name: "docker schema 2",
			blobs:    []blob{dockerConfig, layer(mediaTypeWasm)},
			manifest: imageManifest(mediaTypeDockerManifest, "", dockerConfig, layer(mediaTypeWasm))},
		{name: "index",
			blobs: []blob{wasmConfig, layer(mediaTypeWasm)},
			manifest: map[string]any{
				"schemaVersion": 2,
				"mediaType":     ocispec.MediaTypeImageIndex,
				"manifests":     []ocispec.Descriptor{},
			},
			want: ErrIndex},
		{name: "two layers",
			blobs:    []blob{wasmConfig, layer(mediaTypeWasm), {mediaTypeWasm, big}},
			manifest: imageManifest(ocispec.MediaTypeImageManifest, "", wasmConfig, layer(mediaTypeWasm), blob{mediaTypeWasm, big}),
			want:     ErrLayers},
		{name: "tar layer",
			blobs:    []blob{empty, layer(ocispec.MediaTypeImageLayerGzip)},
			manifest: imageManifest(ocispec.MediaTypeImageManifest, "", empty, layer(ocispec.MediaTypeImageLayerGzip)),
			want:     ErrNotWasm},
		{name: "oras default layer type",
			blobs:    []blob{empty, layer(ocispec.MediaTypeImageLayer)},
			manifest: imageManifest(ocispec.MediaTypeImageManifest, "application/vnd.unknown.artifact.v1", empty, layer(ocispec.MediaTypeImageLayer)),
			want:     ErrNotWasm},
		{name: "not wasm bytes",
			blobs:    []blob{empty, {mediaTypeWasm, []byte("#!/bin/sh\necho hello\n")}},
			manifest: imageManifest(ocispec.MediaTypeImageManifest, "", empty, blob{mediaTypeWasm, []byte("#!/bin/sh\necho hello\n")}),
			want:     ErrNotWasm},
		{name: "over the limit",
			blobs:    []blob{wasmConfig, {mediaTypeWasm, big}},
			manifest: imageManifest(ocispec.MediaTypeImageManifest, "", wasmConfig, blob{mediaTypeWasm, big}),
			max:      4095,
			want:     ErrTooLarge},
		{name: "at the limit",
			blobs:    []blob{wasmConfig, {mediaTypeWasm, big}},
			manifest: imageManifest(ocispec.MediaTypeImageManifest, "", wasmConfig, blob{mediaTypeWasm, big}),
			max:      int64(len(big)),
			bytes:    big},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := "layouts/" + strings.ReplaceAll(tc.name, " ", "-")
			if idx, ok := tc.manifest.(map[string]any); ok && idx["mediaType"] == ocispec.MediaTypeImageIndex {
				// An index of one real image.
				pushRaw(t, host, repo, "image", tc.blobs, imageManifest(ocispec.MediaTypeImageManifest, "", wasmConfig, layer(mediaTypeWasm)))
				raw := getRaw(t, host, repo, "image")
				d := digest.FromBytes(raw)
				idx["manifests"] = []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageManifest, Digest: d, Size: int64(len(raw)),
					Platform: &ocispec.Platform{Architecture: "wasm", OS: "wasip1"}}}
			}
			pushRaw(t, host, repo, "v1", tc.blobs, tc.manifest)
			c := newClient(t, &Config{MaxImageSize: tc.max})
			got, err := c.Pull(t.Context(), host+"/"+repo+":v1", nil)
			if tc.want != nil {
				if !errors.Is(err, tc.want) || got != nil {
					t.Fatalf("Pull: image returned %v, error %v; want %v", got != nil, err, tc.want)
				}
				t.Log(err)
				if !strings.Contains(err.Error(), host+"/"+repo+":v1: ") {
					t.Errorf("error %q does not name the reference", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tc.bytes
			if want == nil {
				want = image
			}
			if !bytes.Equal(got.Bytes, want) || got.Digest != digest.FromBytes(want).String() {
				t.Errorf("Pull returned %d bytes, %s", len(got.Bytes), got.Digest)
			}
		})
	}
}

func getRaw(t *testing.T, host, repo, ref string) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+host+"/v2/"+repo+"/manifests/"+ref, nil)
	req.Header.Set("Accept", ocispec.MediaTypeImageManifest)
	return httpGet(t, req)
}

func TestPullNotFound(t *testing.T) {
	host := startRegistry(t, registryOptions{})
	c := newClient(t, nil)
	pushed, err := c.Push(t.Context(), host+"/berm/echo:v1", readEcho(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, ref := range map[string]string{
		"repository":            host + "/berm/none:v1",
		"tag":                   host + "/berm/echo:v2",
		"digest":                host + "/berm/echo@" + digest.FromString("none").String(),
		"in another repository": host + "/berm/other@" + pushed.ManifestDigest,
	} {
		t.Run(name, func(t *testing.T) {
			for op, f := range map[string]func() (*Image, error){
				"Pull":    func() (*Image, error) { return c.Pull(t.Context(), ref, nil) },
				"Inspect": func() (*Image, error) { return c.Inspect(t.Context(), ref) },
			} {
				got, err := f()
				if !errors.Is(err, ErrNotFound) || got != nil {
					t.Errorf("%s: image returned %v, error %v; want ErrNotFound", op, got != nil, err)
				}
			}
		})
	}
}

// proxy stands between a client and a registry: it counts the blobs fetched
// through it and, when told, flips a byte in the middle of every manifest or
// blob it serves, keeping its length and headers.
type proxy struct {
	host     string
	blobGets atomic.Int32
	corrupt  atomic.Value // "", "blob" or "manifest"
}

func startProxy(t *testing.T, registry string) *proxy {
	t.Helper()
	p := &proxy{}
	p.corrupt.Store("")
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: registry})
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method != http.MethodGet || resp.StatusCode != http.StatusOK {
			return nil
		}
		kind := ""
		switch {
		case strings.Contains(resp.Request.URL.Path, "/blobs/"):
			kind = "blob"
			p.blobGets.Add(1)
		case strings.Contains(resp.Request.URL.Path, "/manifests/"):
			kind = "manifest"
		}
		if kind == "" || p.corrupt.Load() != kind {
			return nil
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		b[len(b)/2] ^= 0x01
		resp.Body = io.NopCloser(bytes.NewReader(b))
		return nil
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	p.host = strings.TrimPrefix(srv.URL, "http://")
	return p
}

// A registry that serves wrong bytes is caught: ErrDigest, and nothing
// returned.
func TestPullCorrupt(t *testing.T) {
	host := startRegistry(t, registryOptions{})
	c := newClient(t, nil)
	image := padded(readEcho(t), 64<<10, 5)
	pushed, err := c.Push(t.Context(), host+"/berm/echo:v1", image, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, host)
	for _, tc := range []struct{ corrupt, ref string }{
		{"blob", p.host + "/berm/echo:v1"},
		{"manifest", p.host + "/berm/echo:v1"},
		{"manifest", p.host + "/berm/echo@" + pushed.ManifestDigest},
	} {
		t.Run(tc.corrupt+" "+tc.ref, func(t *testing.T) {
			p.corrupt.Store(tc.corrupt)
			got, err := c.Pull(t.Context(), tc.ref, nil)
			if !errors.Is(err, ErrDigest) || got != nil {
				t.Fatalf("Pull: image returned %v, error %v; want ErrDigest", got != nil, err)
			}
			t.Log(err)
		})
	}
	p.corrupt.Store("")
	if _, err := c.Pull(t.Context(), p.host+"/berm/echo:v1", nil); err != nil {
		t.Fatalf("Pull through an honest proxy: %v", err)
	}
}

// A program already held is not fetched again, and held bytes are checked.
func TestPullHave(t *testing.T) {
	host := startRegistry(t, registryOptions{})
	c := newClient(t, nil)
	image := readEcho(t)
	if _, err := c.Push(t.Context(), host+"/berm/echo:v1", image, nil); err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, host)
	ref := p.host + "/berm/echo:v1"
	want := digest.FromBytes(image).String()
	for _, tc := range []struct {
		name     string
		held     []byte
		cached   bool
		blobGets int32
		err      error
	}{
		{name: "held", held: image, cached: true, blobGets: 0},
		{name: "not held", held: nil, blobGets: 1},
		{name: "held wrong bytes", held: []byte("\x00asm garbage"), err: ErrDigest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.blobGets.Store(0)
			var asked string
			got, err := c.Pull(t.Context(), ref, &PullOptions{Have: func(d string) ([]byte, bool) {
				asked = d
				return tc.held, tc.held != nil
			}})
			if asked != want {
				t.Errorf("Have asked for %q, want %q", asked, want)
			}
			if tc.err != nil {
				if !errors.Is(err, tc.err) || got != nil {
					t.Fatalf("Pull: image returned %v, error %v; want %v", got != nil, err, tc.err)
				}
				t.Log(err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Cached != tc.cached || !bytes.Equal(got.Bytes, image) {
				t.Errorf("Pull: cached %v, %d bytes", got.Cached, len(got.Bytes))
			}
			if n := p.blobGets.Load(); n != tc.blobGets {
				t.Errorf("%d blobs fetched, want %d", n, tc.blobGets)
			}
		})
	}
}

// Inspect reads a berm-pushed image's tools from the annotation, without
// fetching the layer.
func TestInspect(t *testing.T) {
	host := startRegistry(t, registryOptions{})
	c := newClient(t, nil)
	image := readEcho(t)
	m, err := manifest.Read(image)
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := c.Push(t.Context(), host+"/berm/echo:v1", image, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, host)
	got, err := c.Inspect(t.Context(), p.host+"/berm/echo:v1")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Annotated || !bytes.Equal(got.ABI, m.Raw) || got.Bytes != nil || got.Digest != pushed.Digest {
		t.Errorf("Inspect = %+v", got)
	}
	if n := p.blobGets.Load(); n != 0 {
		t.Errorf("Inspect fetched %d blobs, want none", n)
	}

	// Without the annotation, the layer it fetches must be a berm program.
	stripped, err := manifest.Strip(image)
	if err != nil {
		t.Fatal(err)
	}
	empty := blob{ocispec.MediaTypeEmptyJSON, []byte("{}")}
	plain := blob{mediaTypeWasm, stripped}
	pushRaw(t, host, "plain/wasm", "v1", []blob{empty, plain}, imageManifest(ocispec.MediaTypeImageManifest, "", empty, plain))
	if got, err := c.Inspect(t.Context(), host+"/plain/wasm:v1"); !errors.Is(err, manifest.ErrNoManifest) {
		t.Errorf("Inspect of a module without .berm.abi: image returned %v, error %v; want manifest.ErrNoManifest", got != nil, err)
	}
}

func TestProgress(t *testing.T) {
	host := startRegistry(t, registryOptions{})
	for _, tc := range []struct {
		name string
		size int
		want bool
	}{
		{"small", 1 << 20, false},
		{"large", progressMin + 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			c := newClient(t, &Config{Progress: &out})
			ref := host + "/progress/" + tc.name + ":v1"
			image := padded(readEcho(t), tc.size, 6)
			if _, err := c.Push(t.Context(), ref, image, nil); err != nil {
				t.Fatal(err)
			}
			pushed := out.String()
			out.Reset()
			if _, err := c.Pull(t.Context(), ref, nil); err != nil {
				t.Fatal(err)
			}
			for op, line := range map[string]string{"push": pushed, "pull": out.String()} {
				if !tc.want {
					if line != "" {
						t.Errorf("%s of %d bytes drew %q", op, tc.size, line)
					}
					continue
				}
				if !strings.HasPrefix(line, "\r"+ref+"  ") || !strings.HasSuffix(line, "100%   \n") {
					t.Errorf("%s drew %q", op, line)
				}
			}
		})
	}
}

func TestIsLoopback(t *testing.T) {
	for registry, want := range map[string]bool{
		"localhost":            true,
		"localhost:5000":       true,
		"LOCALHOST:5000":       true,
		"127.0.0.1":            true,
		"127.0.0.1:5000":       true,
		"127.9.8.7:80":         true,
		"[::1]:5000":           true,
		"::1":                  true,
		"[::ffff:127.0.0.1]:5": true,
		"ghcr.io":              false,
		"localhost.example":    false,
		"10.0.0.1:5000":        false,
		"[::2]:5000":           false,
		"0.0.0.0:5000":         false,
	} {
		if got := isLoopback(registry); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", registry, got, want)
		}
	}
}

func FuzzCheckManifest(f *testing.F) {
	seeds, err := filepath.Glob("testdata/*.json")
	if err != nil {
		f.Fatal(err)
	}
	for _, path := range seeds {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(ocispec.MediaTypeImageManifest, b)
	}
	f.Fuzz(func(t *testing.T, mediaType string, raw []byte) {
		const limit = 1 << 20
		m, err := checkManifest(mediaType, raw, limit)
		if err != nil {
			return
		}
		if len(m.Layers) != 1 || !wasmLayerTypes[m.Layers[0].MediaType] || m.Layers[0].Size > limit ||
			m.Layers[0].Digest.Algorithm() != digest.SHA256 {
			t.Errorf("checkManifest accepted %s", raw)
		}
	})
}
