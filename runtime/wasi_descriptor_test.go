package runtime_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// wasiFds is the wasi_fds fixture's runtime, the fixture deployed as fds
// with a directory holding a file f at 3, read-write when write.
func wasiFds(t *testing.T, write bool) (*runtime.Runtime, *runtime.Program) {
	t.Helper()
	return wasiFdsWith(t, write, runtime.Config{})
}

// wasiFdsWith is wasiFds with opts.
func wasiFdsWith(t *testing.T, write bool, opts runtime.Config) (*runtime.Runtime, *runtime.Program) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	rt := poolRuntime(t, opts)
	p := deployPoolFile(t, rt, "fds", "wasi_fds.wasm",
		&sandbox.Grants{Dirs: []sandbox.Dir{{Host: dir, Guest: "/data", Write: write}}})
	return rt, p
}

// Every WASI function that takes a descriptor, called on a granted
// directory's (which wazero opens at its first touch), in each place a
// descriptor goes and failing each way the fixture can make it fail,
// leaves no idle instance holding the directory open: between calls,
// nothing is open through the grant. path_symlink, whose descriptor is its
// third parameter, once did (the rule read only the first): a later call
// from another session could open one file fewer for each such call.
func TestWASIDescriptorsNotHeld(t *testing.T) {
	t.Parallel()
	var manifest struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if err := json.Unmarshal(localImageManifest(t, "wasi_fds.abi.json"), &manifest); err != nil {
		t.Fatal(err)
	}
	for _, write := range []bool{false, true} {
		name := "read-only"
		if write {
			name = "read-write"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rt, p := wasiFds(t, write)
			for _, tool := range manifest.Tools {
				if strings.HasPrefix(tool.Name, "count") {
					continue
				}
				out, err := rt.Call(context.Background(), "fds", tool.Name, []byte(`{}`))
				if n := runtime.OpenFiles(p); n != 0 {
					t.Errorf("%s (result %x, %v): %d files held open by idle instances", tool.Name, out.Result, err, n)
					// The next tools start from a runtime with nothing idle.
					rt, p = wasiFds(t, write)
				}
			}
		})
	}
}

// localImageManifest reads a manifest of this package's testdata/.
func localImageManifest(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A program's own path_open of its directory's "." opens a descriptor
// counted as any other (sandbox.MaxOpenFiles at most), though the
// directory as wazero opens it for the preopen holds none until read: else
// a loop of them would make descriptors, and their memory, without end.
func TestWASITopOpensCounted(t *testing.T) {
	t.Parallel()
	rt, _ := wasiFdsWith(t, false, runtime.Config{Limits: runtime.Limits{Deadline: 5 * time.Second}})
	out, err := rt.Call(context.Background(), "fds", "count_top", []byte(`{}`))
	if err != nil || len(out.Result) != 4 {
		t.Fatalf("fds.count_top: %x, %v; want a count", out.Result, err)
	}
	if n := binary.LittleEndian.Uint32(out.Result); n > sandbox.MaxOpenFiles {
		t.Errorf("opened . %d times, more than %d", n, sandbox.MaxOpenFiles)
	}
}
