package transform

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/berm-dev/berm/internal/wasmbin"
)

// modules are every module of the repository's testdata and examples:
// the WAT fixtures, the C and Go examples (Go's are 3.4 MB), the sandbox's.
func modules(tb testing.TB) map[string][]byte {
	tb.Helper()
	out := map[string][]byte{}
	for _, pattern := range []string{
		"testdata/*.wasm",
		"../../testdata/*.wasm", "../../testdata/broken/*.wasm",
		"../testdata/*.wasm", "../testdata/*/*.wasm", "../host/testdata/*.wasm",
		"../sandbox/testdata/*.wasm", "../../examples/*/*.wasm",
	} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			tb.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				tb.Fatal(err)
			}
			out[strings.TrimPrefix(f, "../")] = b
		}
	}
	if len(out) < 40 {
		tb.Fatalf("found %d modules: run from runtime/transform", len(out))
	}
	return out
}

// TestDeadlineCompiles rewrites every module wazero compiles and compiles
// the result: wazero's validation is the judge of the walker.
func TestDeadlineCompiles(t *testing.T) {
	ctx := context.Background()
	wz := wazero.NewRuntime(ctx)
	defer wz.Close(ctx)
	for name, module := range modules(t) {
		t.Run(name, func(t *testing.T) {
			if _, err := wz.CompileModule(ctx, module); err != nil {
				if _, err := Deadline(module); err == nil {
					// Fine either way: what wazero refuses is compiled as
					// it is, so that its error names the problem.
					t.Logf("rewrote a module wazero refuses")
				}
				return
			}
			start := time.Now()
			out, err := Deadline(module)
			if errors.Is(err, errNoMemory) {
				return // berm refuses it
			}
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			compiled, err := wz.CompileModule(ctx, out.Module)
			if err != nil {
				t.Fatalf("the rewritten module: %v", err)
			}
			defer compiled.Close(ctx)
			if len(module) > 1<<20 {
				t.Logf("%d bytes rewritten in %v, %d bytes more", len(module), took, len(out.Module)-len(module))
			}
			before, err := wz.CompileModule(ctx, module)
			if err != nil {
				t.Fatal(err)
			}
			defer before.Close(ctx)
			for name := range before.ExportedFunctions() {
				if _, ok := compiled.ExportedFunctions()[name]; !ok {
					t.Errorf("export %q lost", name)
				}
			}
		})
	}
}

// TestDeadlineStops runs programs that never end, sets the stop global from
// another goroutine, and expects each to trap soon after.
func TestDeadlineStops(t *testing.T) {
	ctx := context.Background()
	wz := wazero.NewRuntime(ctx)
	defer wz.Close(ctx)
	read := func(file string) Stoppable {
		b, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		out, err := Deadline(b)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	stop, startloop := read("stop.wasm"), read("startloop.wasm")
	if stop.Start != "" || startloop.Start != StartName {
		t.Fatalf("start exports %q and %q, want none and %q", stop.Start, startloop.Start, StartName)
	}
	tests := []struct {
		prog Stoppable
		fn   string
	}{
		{stop, "berm_tool_loop"},
		{stop, "berm_tool_recurse"},
		{stop, "berm_tool_nested"},
		{startloop, startloop.Start},
	}
	for _, tt := range tests {
		t.Run(tt.fn, func(t *testing.T) {
			compiled, err := wz.CompileModule(ctx, tt.prog.Module)
			if err != nil {
				t.Fatal(err)
			}
			mod, err := wz.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName(""))
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close(ctx)
			g := mod.ExportedGlobal(tt.prog.Stop).(api.MutableGlobal)
			const after = 50 * time.Millisecond
			timer := time.AfterFunc(after, func() { g.Set(1) })
			defer timer.Stop()
			start := time.Now()
			_, err = mod.ExportedFunction(tt.fn).Call(ctx)
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), "unreachable") {
				t.Fatalf("got %v, want a trap on unreachable", err)
			}
			if took > after+50*time.Millisecond {
				t.Errorf("stopped %v after the global was set", took-after)
			}
		})
	}
}

// TestDeadlineNames checks that a module exporting the reserved names keeps
// them, and the stop global takes another.
func TestDeadlineNames(t *testing.T) {
	// (module (memory 1) (global (export "berm.stop") i32 (i32.const 7)))
	module := []byte("\x00asm\x01\x00\x00\x00" + "\x05\x03\x01\x00\x01" +
		"\x06\x06\x01\x7f\x00\x41\x07\x0b" +
		"\x07\x0d\x01\x09berm.stop\x03\x00")
	out, err := Deadline(module)
	if err != nil {
		t.Fatal(err)
	}
	if out.Stop != StopName+".1" {
		t.Errorf("stop global exported as %q, want %q", out.Stop, StopName+".1")
	}
	ctx := context.Background()
	wz := wazero.NewRuntime(ctx)
	defer wz.Close(ctx)
	mod, err := wz.Instantiate(ctx, out.Module)
	if err != nil {
		t.Fatal(err)
	}
	if got := mod.ExportedGlobal(StopName).Get(); got != 7 {
		t.Errorf("the module's own %s is %d, want 7", StopName, got)
	}
}

// TestDeadlineSections adds the global and export sections where a module
// has none, in the format's order.
func TestDeadlineSections(t *testing.T) {
	tests := map[string]string{
		"memory": "\x05\x03\x01\x00\x01",
		// a type, a function, a memory, a data count, its code, a custom section
		"function": "\x01\x04\x01\x60\x00\x00" + "\x03\x02\x01\x00" + "\x05\x03\x01\x00\x01" + "\x0c\x01\x00" +
			"\x0a\x07\x01\x05\x00\x03\x40\x0b\x0b" + "\x00\x03\x01x\x00",
	}
	ctx := context.Background()
	wz := wazero.NewRuntime(ctx)
	defer wz.Close(ctx)
	for name, sections := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := Deadline([]byte("\x00asm\x01\x00\x00\x00" + sections))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := wz.CompileModule(ctx, out.Module); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDeadlineRefuses returns ErrUnsupported, and no panic, for what it does
// not read in full.
func TestDeadlineRefuses(t *testing.T) {
	tests := map[string]string{
		"not wasm":      "hello",
		"truncated":     "\x00asm\x01\x00\x00\x00\x0a\x05\x01",
		"unknown op":    "\x00asm\x01\x00\x00\x00\x0a\x05\x01\x03\x00\x06\x0b",
		"two globals":   "\x00asm\x01\x00\x00\x00\x06\x01\x00\x06\x01\x00",
		"code trailing": "\x00asm\x01\x00\x00\x00\x0a\x05\x01\x02\x00\x0b\x00",
	}
	for name, module := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := Deadline([]byte(module)); !errors.Is(err, ErrUnsupported) {
				t.Errorf("got %v, want ErrUnsupported", err)
			}
		})
	}
}

// FuzzDeadline holds the transform to: no panic on any input, and every
// module wazero accepts is rewritten into one it accepts too.
func FuzzDeadline(f *testing.F) {
	for name, module := range modules(f) {
		if len(module) < 64<<10 || strings.HasSuffix(name, "wc.wasm") {
			f.Add(module)
		}
	}
	ctx := context.Background()
	// The interpreter validates as the compiler does, and compiles faster.
	wz := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer wz.Close(ctx)
	f.Fuzz(func(t *testing.T, module []byte) {
		out, err := Deadline(module)
		if err != nil && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("error %v is not ErrUnsupported", err)
		}
		if !plausible(module) {
			return
		}
		compiled, cerr := wz.CompileModule(ctx, module)
		if cerr != nil {
			return
		}
		compiled.Close(ctx)
		if errors.Is(err, errNoMemory) {
			return
		}
		if err != nil {
			t.Fatalf("wazero compiles the module, the transform refuses it: %v", err)
		}
		if !bytes.HasPrefix(out.Module, []byte("\x00asm")) {
			t.Fatal("no module")
		}
		rewritten, err := wz.CompileModule(ctx, out.Module)
		if err != nil {
			t.Fatalf("the rewritten module: %v", err)
		}
		rewritten.Close(ctx)
	})
}

// plausible reports whether each section's first count is within its
// payload: wazero 1.12 sizes allocations by such counts before it reads the
// elements, so a count of 2^31 in a few bytes runs it out of memory
// (testdata/fuzz/FuzzDeadline/cb3b34b2503c33d3).
func plausible(module []byte) bool {
	for s, err := range wasmbin.Sections(module) {
		if err != nil {
			return false
		}
		if s.ID == wasmbin.SectionCustom || s.ID == wasmbin.SectionStart {
			continue
		}
		r := wasmbin.NewReader(s.Payload)
		r.Count()
		if r.Err() != nil {
			return false
		}
	}
	return true
}
