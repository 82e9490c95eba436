package transform

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/berm-dev/berm/internal/wasmbin"
)

// TestSnapshotCompiles rewrites every module wazero compiles and compiles
// the result: wazero's validation is the judge.
func TestSnapshotCompiles(t *testing.T) {
	ctx := context.Background()
	r := validator(ctx)
	defer r.Close(ctx)
	rewritten := 0
	for name, module := range modules(t) {
		if testing.Short() && len(module) > 1<<20 {
			continue
		}
		compiled, err := r.CompileModule(ctx, module)
		if err != nil {
			continue
		}
		compiled.Close(ctx)
		out, err := Snapshot(module)
		if errors.Is(err, ErrUnsupported) {
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		compiled, err = r.CompileModule(ctx, out.Module)
		if err != nil {
			t.Errorf("%s: the rewritten module does not compile: %v", name, err)
			continue
		}
		for _, g := range out.Globals {
			if !strings.HasPrefix(g.Name, GlobalName) {
				t.Errorf("%s: global exported as %q", name, g.Name)
			}
		}
		compiled.Close(ctx)
		rewritten++
	}
	if rewritten < 20 {
		t.Errorf("rewrote %d modules, want most of them", rewritten)
	}
}

func TestSnapshotModules(t *testing.T) {
	tests := []struct {
		file    string
		globals []Global
		blocker string // a word of it
		start   bool
		data    int // segments left
	}{
		{file: "../../testdata/warm.wasm", globals: []Global{{"berm.global.0", 0x7f}, {"berm.global.1", 0x7e}}},
		{file: "../../testdata/warm_table.wasm", globals: []Global{{"berm.global.0", 0x7f}}, blocker: "table.set"},
		{file: "testdata/startloop.wasm", start: true},
		// The module exports berm.global.0 itself: the host's name takes a
		// suffix. Its three segments stay, the active ones empty.
		{file: "testdata/segments.wasm", globals: []Global{{"berm.global.0.1", 0x7f}}, data: 3},
		// Without a data count section the active segments go.
		{file: "../../../testdata/init.wasm", globals: []Global{{"berm.global.1", 0x7f}, {"berm.global.2", 0x7f}}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			module, err := os.ReadFile(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			out, err := Snapshot(module)
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Globals) != len(tt.globals) {
				t.Fatalf("globals %v, want %v", out.Globals, tt.globals)
			}
			for i := range tt.globals {
				if out.Globals[i] != tt.globals[i] {
					t.Errorf("global %d: %v, want %v", i, out.Globals[i], tt.globals[i])
				}
			}
			if (tt.blocker == "") != (out.Blocker == "") || !strings.Contains(out.Blocker, tt.blocker) {
				t.Errorf("blocker %q, want one with %q", out.Blocker, tt.blocker)
			}
			if out.Start != tt.start {
				t.Errorf("start %v, want %v", out.Start, tt.start)
			}
			segments, bytes := dataSegments(t, out.Module)
			if segments != tt.data {
				t.Errorf("%d data segments, want %d", segments, tt.data)
			}
			if tt.data > 0 && bytes != len("passive") {
				t.Errorf("%d bytes of data left, want the passive segment's 7", bytes)
			}
			ctx := context.Background()
			r := wazero.NewRuntime(ctx)
			defer r.Close(ctx)
			if _, err := r.CompileModule(ctx, out.Module); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// dataSegments counts the data section's segments and their bytes.
func dataSegments(t *testing.T, module []byte) (n, size int) {
	t.Helper()
	for s, err := range wasmbin.Sections(module) {
		if err != nil {
			t.Fatal(err)
		}
		if s.ID != wasmbin.SectionData {
			continue
		}
		r := wasmbin.NewReader(s.Payload)
		n = r.Count()
		for range n {
			flag := r.U32()
			if flag == 2 {
				r.U32()
			}
			if flag != 1 {
				if err := r.SkipConstExpr(); err != nil {
					t.Fatal(err)
				}
			}
			size += len(r.Bytes(r.U32()))
		}
		if !r.Done() {
			t.Fatal("data section: does not read back")
		}
	}
	return n, size
}

func TestSnapshotRefuses(t *testing.T) {
	for name, module := range map[string][]byte{
		"not wasm":  []byte("hello"),
		"no memory": []byte(wasmbin.Header),
		"truncated": append([]byte(wasmbin.Header), wasmbin.SectionGlobal, 5, 1),
	} {
		if _, err := Snapshot(module); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", name, err)
		}
	}
}

// FuzzSnapshot holds Snapshot to two things on any input: it never panics
// past its recover, and what it returns for a module wazero compiles
// compiles too.
func FuzzSnapshot(f *testing.F) {
	for _, module := range modules(f) {
		if len(module) < 64<<10 {
			f.Add(module)
		}
	}
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	f.Fuzz(func(t *testing.T, module []byte) {
		out, err := Snapshot(module)
		if err != nil {
			return
		}
		compiled, err := r.CompileModule(ctx, module)
		if err != nil {
			return
		}
		compiled.Close(ctx)
		if compiled, err = r.CompileModule(ctx, out.Module); err != nil {
			t.Fatalf("the rewrite of a module wazero compiles does not compile: %v", err)
		}
		compiled.Close(ctx)
	})
}
