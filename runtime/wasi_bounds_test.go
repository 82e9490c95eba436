package runtime_test

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// A WASI call past a bound on what it may ask for traps, naming the bound;
// at the bound it runs: the iovecs of one call (fd_write of 1025), the
// length of a path (a path of 60 MiB held the host 6 s and 2 GiB), the
// subscriptions of poll_oneoff, and the descriptor fd_renumber renumbers to
// (wazero grows its table to it: 16 GiB for the largest).
func TestWASIBounds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	rt := poolRuntime(t, runtime.Config{})
	deployPoolFile(t, rt, "bounds", "wasi_bounds.wasm",
		&sandbox.Grants{Dirs: []sandbox.Dir{{Host: dir, Guest: "/data"}}})
	const enametoolong = 37
	for _, tc := range []struct {
		bound string
		errno uint32 // at the bound
		words string // of the trap past it
	}{
		{"iovecs", 0, "fd_write: 1025 iovecs, more than IOV_MAX (1024)"},
		{"path", enametoolong, "path_filestat_get: a path of 4097 bytes, longer than PATH_MAX (4096)"},
		{"poll", 0, "poll_oneoff: 4097 subscriptions"},
		{"renumber", 0, "fd_renumber: descriptor 65536"},
	} {
		out, err := rt.Call(context.Background(), "bounds", tc.bound+"_at", []byte(`{}`))
		if err != nil || len(out.Result) != 4 || binary.LittleEndian.Uint32(out.Result) != tc.errno {
			t.Errorf("%s at the bound: %x, %v; want errno %d", tc.bound, out.Result, err, tc.errno)
		}
		_, err = rt.Call(context.Background(), "bounds", tc.bound+"_past", []byte(`{}`))
		if !errors.Is(err, runtime.ErrTrap) || !strings.Contains(err.Error(), tc.words) {
			t.Errorf("%s past the bound: %v, want a trap saying %q", tc.bound, err, tc.words)
		}
	}
}
