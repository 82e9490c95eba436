package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berm-dev/berm/manifest"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// getManifest fetches the raw OCI manifest of repo:ref straight from the
// registry's HTTP API.
func getManifest(t *testing.T, host, repo, ref string) ocispec.Manifest {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+host+"/v2/"+repo+"/manifests/"+ref, nil)
	req.Header.Set("Accept", ocispec.MediaTypeImageManifest)
	var m ocispec.Manifest
	if err := json.Unmarshal(httpGet(t, req), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func getBlob(t *testing.T, host, repo string, d digest.Digest) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+host+"/v2/"+repo+"/blobs/"+d.String(), nil)
	return httpGet(t, req)
}

func httpGet(t *testing.T, req *http.Request) []byte {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v: %s", req.URL, resp.Status, err, b)
	}
	return b
}

func TestPushLayout(t *testing.T) {
	host := startRegistry(t, registryOptions{})
	c := newClient(t, nil)
	image := readEcho(t)
	m, err := manifest.Read(image)
	if err != nil {
		t.Fatal(err)
	}

	got, err := c.Push(t.Context(), host+"/berm/echo:v1", image, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &Image{
		Reference:      host + "/berm/echo:v1",
		Resolved:       host + "/berm/echo@" + got.ManifestDigest,
		ManifestDigest: got.ManifestDigest,
		Digest:         digest.FromBytes(image).String(),
		Size:           int64(len(image)),
		Title:          "echo.wasm",
	}
	if !equalJSON(t, got, want) {
		t.Errorf("Push = %+v, want %+v", got, want)
	}

	om := getManifest(t, host, "berm/echo", "v1")
	if om.MediaType != ocispec.MediaTypeImageManifest || om.Config.MediaType != mediaTypeWasmConfig {
		t.Errorf("manifest type %q, config type %q", om.MediaType, om.Config.MediaType)
	}
	if len(om.Layers) != 1 {
		t.Fatalf("%d layers, want 1", len(om.Layers))
	}
	l := om.Layers[0]
	if l.MediaType != mediaTypeWasm || l.Digest.String() != want.Digest || l.Size != want.Size ||
		l.Annotations[ocispec.AnnotationTitle] != "echo.wasm" {
		t.Errorf("layer = %+v", l)
	}
	if a := om.Annotations[AnnotationABI]; a != string(m.Raw) {
		t.Errorf("annotation %s = %q, want the .berm.abi payload %q", AnnotationABI, a, m.Raw)
	}
	if a := om.Annotations[ocispec.AnnotationCreated]; a != "1970-01-01T00:00:00Z" {
		t.Errorf("created = %q, want the Unix epoch", a)
	}

	var config map[string]any
	if err := json.Unmarshal(getBlob(t, host, "berm/echo", om.Config.Digest), &config); err != nil {
		t.Fatal(err)
	}
	wantConfig := map[string]any{
		"created":      "1970-01-01T00:00:00Z",
		"architecture": "wasm",
		"os":           "wasip1",
		"layerDigests": []any{want.Digest},
	}
	if !equalJSON(t, config, wantConfig) {
		t.Errorf("config = %v, want %v", config, wantConfig)
	}
	if b := getBlob(t, host, "berm/echo", l.Digest); !bytes.Equal(b, image) {
		t.Error("layer bytes differ from the file")
	}
}

func TestPushReproducible(t *testing.T) {
	host := startRegistry(t, registryOptions{})
	c := newClient(t, nil)
	image := readEcho(t)
	ref := host + "/berm/echo:v1"
	push := func(opts *PushOptions) string {
		t.Helper()
		got, err := c.Push(t.Context(), ref, image, opts)
		if err != nil {
			t.Fatal(err)
		}
		return got.ManifestDigest
	}
	first := push(nil)
	if again := push(nil); again != first {
		t.Errorf("second push: manifest %s, first %s", again, first)
	}
	created := time.Date(2025, 3, 4, 5, 6, 7, 0, time.FixedZone("CET", 3600))
	dated := push(&PushOptions{Created: created})
	if dated == first {
		t.Error("a push with another creation time gave the same manifest")
	}
	if again := push(&PushOptions{Created: created}); again != dated {
		t.Errorf("second dated push: manifest %s, first %s", again, dated)
	}
	if a := getManifest(t, host, "berm/echo", "v1").Annotations[ocispec.AnnotationCreated]; a != "2025-03-04T04:06:07Z" {
		t.Errorf("created = %q", a)
	}
}

func TestPushRefusals(t *testing.T) {
	image := readEcho(t)
	stripped, err := manifest.Strip(image)
	if err != nil {
		t.Fatal(err)
	}
	// Every refusal comes before any request: the registry need not exist.
	for _, tc := range []struct {
		name  string
		ref   string
		image []byte
		max   int64
		want  error
	}{
		{"no manifest", "localhost:1/berm/echo:v1", stripped, 0, manifest.ErrNoManifest},
		{"not wasm", "localhost:1/berm/echo:v1", []byte("hello"), 0, manifest.ErrInvalid},
		{"too large", "localhost:1/berm/echo:v1", image, int64(len(image) - 1), ErrTooLarge},
		{"digest reference", "localhost:1/berm/echo@" + digest.FromBytes(image).String(), image, 0, ErrReference},
		{"no registry", "echo:v1", image, 0, ErrReference},
		{"bad tag", "localhost:1/berm/echo:v1!", image, 0, ErrReference},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, &Config{MaxImageSize: tc.max})
			got, err := c.Push(t.Context(), tc.ref, tc.image, nil)
			if !errors.Is(err, tc.want) || got != nil {
				t.Fatalf("Push: image returned %v, error %v; want %v", got != nil, err, tc.want)
			}
			t.Log(err)
		})
	}
}

// What berm pushes, oras pulls to a file of the same bytes.
func TestOrasPullsPush(t *testing.T) {
	orasBin(t) // skip or fail before starting a registry
	host := startRegistry(t, registryOptions{})
	c := newClient(t, nil)
	image := padded(readEcho(t), 300<<10, 1)
	ref := host + "/berm/echo:v1"
	if _, err := c.Push(t.Context(), ref, image, &PushOptions{Title: "program.wasm"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	runOras(t, dir, "pull", "--plain-http", ref)
	got, err := os.ReadFile(filepath.Join(dir, "program.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, image) {
		t.Errorf("oras pulled %d bytes, pushed %d: not the same", len(got), len(image))
	}
}

// equalJSON compares two values by their JSON encodings.
func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ja, jb)
}
