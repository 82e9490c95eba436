package examples

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"reflect"
	"testing"

	"github.com/berm-dev/berm/manifest"
)

// TestImages checks that every example's committed image carries the
// manifest beside its source: run `make examples` when it does not. An
// example built by berm build (EXAMPLES_BERM in examples.mk) has no
// berm.abi.json but a berm.toml, and its own test compares the image's
// manifest with what it registers.
func TestImages(t *testing.T) {
	if got, want := Names(), []string{"fetch", "files", "hello", "jsonfmt", "notes", "wc"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names() = %q, want %q", got, want)
	}
	for _, name := range Names() {
		image, ok := Image(name)
		if !ok {
			t.Fatalf("Image(%q): none", name)
		}
		m, err := manifest.Read(image)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		source, err := os.ReadFile(name + "/berm.abi.json")
		if errors.Is(err, fs.ErrNotExist) {
			if _, err := os.Stat(name + "/berm.toml"); err != nil {
				t.Errorf("%s: neither berm.abi.json nor berm.toml", name)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m.Raw, source) {
			t.Errorf("%s: the image's manifest differs from %s/berm.abi.json: run make examples", name, name)
		}
	}
	if _, ok := Image("nope"); ok {
		t.Error(`Image("nope") found an image`)
	}
}
