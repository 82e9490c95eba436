package manifest_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/berm-dev/berm/manifest"
)

// FuzzRead shows that no input makes Read panic or hang, that every refusal
// is an ErrInvalid, and that what Read accepts keeps the ABI's promises.
// Seeds: every fixture, valid and broken, plus the committed corpus in
// testdata/fuzz/FuzzRead.
func FuzzRead(f *testing.F) {
	for _, pattern := range []string{"../testdata/*.wasm", "../testdata/broken/*.wasm"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, image []byte) {
		m, err := manifest.Read(image)
		if err != nil {
			if !errors.Is(err, manifest.ErrInvalid) {
				t.Fatalf("refusal %v does not wrap ErrInvalid", err)
			}
			return
		}
		if len(m.Tools) == 0 {
			t.Fatal("accepted an image with no tools")
		}
		for _, tool := range m.Tools {
			if !manifest.ValidToolName(tool.Name) {
				t.Fatalf("accepted tool name %q", tool.Name)
			}
			// Validation of any arguments must not panic either.
			_ = tool.Validate(image)
			_ = tool.Validate([]byte(`{}`))
		}
		// The manifest survives being stripped and attached again.
		stripped, err := manifest.Strip(image)
		if err != nil {
			t.Fatalf("strip an accepted image: %v", err)
		}
		again, err := manifest.Attach(stripped, m.Raw)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := manifest.Read(again)
		if err != nil {
			t.Fatalf("re-attached manifest refused: %v", err)
		}
		if len(m2.Tools) != len(m.Tools) {
			t.Fatalf("re-attached manifest has %d tools, want %d", len(m2.Tools), len(m.Tools))
		}
	})
}
