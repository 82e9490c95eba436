package runtime_test

import (
	"context"
	"os"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// A berm.call frame's names are the program's bytes, of any length: the
// host checks them by length before it copies them, and a refusal quotes
// at most a prefix of one that is no name. A program name of 127 MiB was
// copied into three strings and the refusal (685 MB for one call); here
// one of 64 MiB must cost the host less than a quarter of it.
// Not parallel: what the call allocated is read from the whole process.
func TestCallFrameNames(t *testing.T) {
	rt := newRuntimeDepth(t, runtime.DefaultCallDepth, nil, nil)
	deployLocal(t, rt, "frame", "call_frame.wasm")
	deploy(t, rt, "nest", "nest.wasm")
	tests := []struct{ tool, want string }{
		{"program", `berm.call "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"….t: refused: not a program's name: 67108864 bytes, over 63`},
		{"tool", `berm.call nest."aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"…: refused: not a tool's name: 67108864 bytes, over 64`},
		{"short", `berm.call "Bad\nname".t: refused: not a program's name: want 1 to 63 characters of [a-z0-9-], starting with a letter or digit`},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			var before, after goruntime.MemStats
			goruntime.ReadMemStats(&before)
			out, err := rt.Call(context.Background(), "frame", tt.tool, []byte(`{}`))
			goruntime.ReadMemStats(&after)
			check(t, out, err, want{result: tt.want})
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
				t.Errorf("the call allocated %d MiB on the host, want well under the name's 64 MiB", alloc>>20)
			}
		})
	}
}

// wazero joins a path onto the name of the directory descriptor it is
// relative to, and so hands the sandbox a path longer than the program's
// own (which the listener bounds to MaxPath): the third of three opens of
// a 2007-byte path, each under the descriptor the last gave, names 6023
// bytes and fails with ENAMETOOLONG, as past PATH_MAX on Linux. It was
// opened, and a descriptor so opened nine times 2000 levels down (36 KB)
// was walked again by every operation under it.
func TestCallDescriptorPathBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := strings.Repeat("a", 250)
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	for range 24 {
		if err := r.Mkdir(name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := r.OpenRoot(name)
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		r = next
	}
	r.Close()
	rt := startRuntime(t, false, nil) // the plain path under BERM_PLAIN=1
	deployMode(t, rt, startMode{}, "deepfd", localImage(t, "call_deepfd.wasm"),
		&sandbox.Grants{Dirs: []sandbox.Dir{{Host: dir, Guest: "/d", Write: true}}})
	out, err := rt.Call(context.Background(), "deepfd", "open", []byte(`{}`))
	check(t, out, err, want{result: "\x00\x00\x25"}) // 0, 0, ENAMETOOLONG
}
