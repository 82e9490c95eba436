package transform

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
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
		"../../../testdata/*.wasm", "../../../testdata/broken/*.wasm",
		"../../testdata/*.wasm", "../../testdata/*/*.wasm", "../../host/testdata/*.wasm",
		"../../sandbox/testdata/*.wasm", "../../../examples/*/*.wasm",
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
			out[f] = b
		}
	}
	if len(out) < 40 {
		tb.Fatalf("found %d modules: run from runtime/internal/transform", len(out))
	}
	return out
}

// validator is a wazero runtime that validates what it compiles as the
// compiler does, without making machine code: these tests ask wazero
// whether a module is valid, and its compiler took 60 of the package's 70
// seconds to answer. The runtime's tests compile the rewritten modules to
// machine code and run them.
func validator(ctx context.Context) wazero.Runtime {
	return wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
}

// TestDeadlineCompiles rewrites every module wazero compiles and compiles
// the result: wazero's validation is the judge of the walker.
func TestDeadlineCompiles(t *testing.T) {
	ctx := context.Background()
	wz := validator(ctx)
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
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			compiled, err := wz.CompileModule(ctx, out)
			if err != nil {
				t.Fatalf("the rewritten module: %v", err)
			}
			defer compiled.Close(ctx)
			if len(module) > 1<<20 {
				t.Logf("%d bytes rewritten in %v, %d bytes more", len(module), took, len(out)-len(module))
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

// tickHost instantiates in wz the module berm with the tick, which traps
// once stop is set, and counts the ticks.
func tickHost(tb testing.TB, wz wazero.Runtime, stop *atomic.Bool, ticks *atomic.Int64) {
	tb.Helper()
	_, err := wz.NewHostModuleBuilder(TickModule).NewFunctionBuilder().
		WithGoFunction(api.GoFunc(func(context.Context, []uint64) {
			ticks.Add(1)
			if stop.Load() {
				panic(errors.New("stopped"))
			}
		}), nil, nil).
		Export(TickName).
		Instantiate(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
}

// ticking instantiates module, rewritten, in a runtime of its own with the
// tick, and returns the instance and its count of ticks.
func ticking(t *testing.T, module []byte) (api.Module, *atomic.Int64) {
	t.Helper()
	rewritten, err := Deadline(module)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wz := wazero.NewRuntime(ctx)
	t.Cleanup(func() { wz.Close(ctx) })
	var ticks atomic.Int64
	var stop atomic.Bool
	tickHost(t, wz, &stop, &ticks)
	mod, err := wz.InstantiateWithConfig(ctx, rewritten, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	return mod, &ticks
}

// TestDeadlineStops runs programs that never end, has the tick trap from
// another goroutine's word, and expects each to stop soon after. The start
// function runs at instantiation, and is stopped the same way.
func TestDeadlineStops(t *testing.T) {
	ctx := context.Background()
	wz := wazero.NewRuntime(ctx)
	defer wz.Close(ctx)
	var stop atomic.Bool
	var ticks atomic.Int64
	tickHost(t, wz, &stop, &ticks)
	read := func(file string) wazero.CompiledModule {
		b, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		out, err := Deadline(b)
		if err != nil {
			t.Fatal(err)
		}
		compiled, err := wz.CompileModule(ctx, out)
		if err != nil {
			t.Fatal(err)
		}
		return compiled
	}
	stopMod, startloop := read("stop.wasm"), read("startloop.wasm")
	tests := []struct {
		mod wazero.CompiledModule
		fn  string // "" for the start function
	}{
		{stopMod, "berm_tool_loop"},
		{stopMod, "berm_tool_recurse"},
		{stopMod, "berm_tool_nested"},
		{startloop, ""},
	}
	for _, tt := range tests {
		name := tt.fn
		if name == "" {
			name = "start"
		}
		t.Run(name, func(t *testing.T) {
			stop.Store(false)
			const after = 50 * time.Millisecond
			timer := time.AfterFunc(after, func() { stop.Store(true) })
			defer timer.Stop()
			start := time.Now()
			mod, err := wz.InstantiateModule(ctx, tt.mod, wazero.NewModuleConfig().WithName(""))
			if err == nil {
				defer mod.Close(ctx)
				_, err = mod.ExportedFunction(tt.fn).Call(ctx)
			}
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), "stopped") {
				t.Fatalf("got %v, want the tick's trap", err)
			}
			// Generous: a tick is microseconds apart.
			if took > after+time.Second {
				t.Errorf("stopped %v after the tick said so", took-after)
			}
		})
	}
}

// instantiateFuncs instantiates module in a runtime of its own, with berm's
// syscall (which keeps what berm.result gives it) and tick (which counts).
func instantiateFuncs(t *testing.T, module []byte, result *[]byte, ticks *atomic.Int64) api.Module {
	t.Helper()
	ctx := context.Background()
	wz := wazero.NewRuntime(ctx)
	t.Cleanup(func() { wz.Close(ctx) })
	_, err := wz.NewHostModuleBuilder(TickModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, stack []uint64) {
			b, _ := m.Memory().Read(uint32(stack[1]), uint32(stack[2]))
			*result = append([]byte(nil), b...)
			stack[0] = 0
		}), []api.ValueType{api.ValueTypeI64, api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}).
		Export("syscall").
		NewFunctionBuilder().
		WithGoFunction(api.GoFunc(func(context.Context, []uint64) { ticks.Add(1) }), nil, nil).
		Export(TickName).
		Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := wz.InstantiateWithConfig(ctx, module, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	return mod
}

// TestDeadlineFuncs runs a module that names its functions every way a
// module can, before the rewrite and after: the same result, and the names
// of its name section moved with the functions.
func TestDeadlineFuncs(t *testing.T) {
	module, err := os.ReadFile(filepath.Join("testdata", "funcs.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	// A name section: function 0 is the import of berm.syscall.
	names := wasmbin.AppendULEB(nil, 3)
	for i, name := range []string{"add1", "double", "triple"} {
		names = wasmbin.AppendName(wasmbin.AppendULEB(names, uint64(i+1)), name)
	}
	section := append(wasmbin.AppendName(nil, "name"), 1)
	section = append(wasmbin.AppendULEB(section, uint64(len(names))), names...)
	module = wasmbin.AppendSection(module, wasmbin.SectionCustom, section)
	rewritten, err := Deadline(module)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, m := range map[string][]byte{"original": module, "rewritten": rewritten} {
		t.Run(name, func(t *testing.T) {
			var result []byte
			var ticks atomic.Int64
			mod := instantiateFuncs(t, m, &result, &ticks)
			if _, err := mod.ExportedFunction("berm_tool_run").Call(ctx); err != nil {
				t.Fatal(err)
			}
			if string(result) != "1166" {
				t.Errorf("run returned %q, want 1166", result)
			}
			double := mod.ExportedFunction("double").Definition()
			if !strings.HasSuffix(double.DebugName(), ".double") {
				t.Errorf("export double is named %q, want .double", double.DebugName())
			}
			// 64 fills of 1 MiB, each cut into 16 of BulkChunk that weigh
			// 1 + 256 turns, and 1 for the loop.
			if _, err := mod.ExportedFunction("fill").Call(ctx, 64); err != nil {
				t.Fatal(err)
			}
			want := int64(0)
			if name == "rewritten" {
				want = 64 * (1<<20/BulkChunk*(1+BulkChunk>>BulkShift) + 1) / Period
			}
			if got := ticks.Load(); got != want {
				t.Errorf("%d ticks, want %d", got, want)
			}
		})
	}
}

// TestDeadlineDense counts in a function of many loops by calls of a
// function of its own, which the rewrite adds, and still ticks.
func TestDeadlineDense(t *testing.T) {
	b := []byte(wasmbin.Header)
	b = wasmbin.AppendSection(b, 1, []byte{1, 0x60, 0, 0}) // a type: () -> ()
	b = wasmbin.AppendSection(b, 3, []byte{1, 0})          // function 0 of it
	b = wasmbin.AppendSection(b, 7, append(wasmbin.AppendName([]byte{1}, "dense"), 0, 0))
	// (local $i i32) (local.set $i 1000) loop { DenseCounts+1 empty loops;
	// br_if 0 (local.tee $i (i - 1)) }
	body := []byte{1, 1, 0x7f, 0x41, 0xe8, 0x07, 0x21, 0, 0x03, 0x40}
	for range DenseCounts + 1 {
		body = append(body, 0x03, 0x40, 0x0b)
	}
	body = append(body, 0x20, 0, 0x41, 1, 0x6b, 0x22, 0, 0x0d, 0, 0x0b, 0x0b)
	b = wasmbin.AppendSection(b, 10, append(wasmbin.AppendULEB([]byte{1}, uint64(len(body))), body...))
	rewritten, err := Deadline(b)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wz := wazero.NewRuntime(ctx)
	defer wz.Close(ctx)
	var ticks atomic.Int64
	var stop atomic.Bool
	tickHost(t, wz, &stop, &ticks)
	compiled, err := wz.CompileModule(ctx, rewritten)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(compiled.ImportedFunctions()); got != 1 {
		t.Errorf("%d functions imported, want the tick", got)
	}
	mod, err := wz.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mod.ExportedFunction("dense").Call(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := ticks.Load(), int64(1000*(DenseCounts+2)/Period); got != want {
		t.Errorf("%d ticks, want %d", got, want)
	}
	// 4 bytes a count, and what every rewrite adds (the import, the
	// global, its export, the function that counts).
	if len(rewritten) > len(b)+(DenseCounts+2)*4+96 {
		t.Errorf("%d bytes rewritten into %d: the count is inline", len(b), len(rewritten))
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
			if _, err := wz.CompileModule(ctx, out); err != nil {
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
		// Its memory exported under the counter's name.
		"counter's name": "\x00asm\x01\x00\x00\x00\x05\x03\x01\x00\x01\x07\x17\x01\x13" + CounterExport + "\x02\x00",
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
		if err != nil {
			t.Fatalf("wazero compiles the module, the transform refuses it: %v", err)
		}
		if !bytes.HasPrefix(out, []byte("\x00asm")) {
			t.Fatal("no module")
		}
		rewritten, err := wz.CompileModule(ctx, out)
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

// testFunc is a function of a module testModule builds: of type () -> ()
// without params, (i32) -> () with; exported under export unless empty.
type testFunc struct {
	export string
	params bool
	body   []byte // locals, instructions, end
}

// testModule builds a module of one page of memory and funcs.
func testModule(funcs ...testFunc) []byte {
	b := []byte(wasmbin.Header)
	b = wasmbin.AppendSection(b, wasmbin.SectionType, []byte{2, 0x60, 0, 0, 0x60, 1, 0x7f, 0})
	types := wasmbin.AppendULEB(nil, uint64(len(funcs)))
	var exports, code []byte
	exported := 0
	for i, f := range funcs {
		if f.params {
			types = append(types, 1)
		} else {
			types = append(types, 0)
		}
		if f.export != "" {
			exports = append(wasmbin.AppendName(exports, f.export), 0)
			exports = wasmbin.AppendULEB(exports, uint64(i))
			exported++
		}
		code = append(wasmbin.AppendULEB(code, uint64(len(f.body))), f.body...)
	}
	b = wasmbin.AppendSection(b, wasmbin.SectionFunction, types)
	b = wasmbin.AppendSection(b, 5, []byte{1, 0, 1})
	b = wasmbin.AppendSection(b, 7, append(wasmbin.AppendULEB(nil, uint64(exported)), exports...))
	return wasmbin.AppendSection(b, 10, append(wasmbin.AppendULEB(nil, uint64(len(funcs))), code...))
}

// loopOf is a body of (param $n i32): loop { inner; br_if 0 (local.tee $n
// (n - 1)) }.
func loopOf(inner []byte) []byte {
	b := append([]byte{0, 0x03, 0x40}, inner...)
	return append(b, 0x20, 0, 0x41, 1, 0x6b, 0x22, 0, 0x0d, 0, 0x0b, 0x0b)
}

// fill is memory.fill of n bytes at 0.
func fill(n int64) []byte {
	return append(wasmbin.AppendSLEB([]byte{0x41, 0, 0x41, 0, 0x41}, n), 0xfc, 11, 0)
}

// fillNotConst is memory.fill of n bytes at 0, of a length the rewrite cannot
// tell: local 0 times 0, or n.
func fillNotConst(n int64) []byte {
	b := wasmbin.AppendSLEB([]byte{0x41, 0, 0x41, 0, 0x20, 0, 0x41, 0, 0x6c, 0x41}, n)
	return append(b, 0x72, 0xfc, 11, 0)
}

// leafOf is the body of a function of no parameters of the instructions
// op, n times; each leaves the stack as it found it.
func leafOf(op []byte, n int) []byte {
	return append(append([]byte{0}, bytes.Repeat(op, n)...), 0x0b)
}

// TestDeadlineWeights runs loops of work that a count of one turn per loop
// header would hardly see, and wants the ticks their work weighs: short
// fills (1 turn each and one per 256 bytes, not 0), a call of a large leaf
// (1 turn per 1 KiB of its body), a loop of a large body (likewise), calls
// of leaves of slow instructions or of instructions that leave compiled
// code, loads, and a function of more bulk operations than DenseCounts,
// which counts by calls.
func TestDeadlineWeights(t *testing.T) {
	nops := func(n int) []byte { return bytes.Repeat([]byte{0x01}, n) }
	denseFills := bytes.Repeat(fillNotConst(4095), DenseCounts+1)
	// f64.sqrt of f64.sqrt of 1, stored: a chain no compiler can cut.
	sqrts := append([]byte{0, 0x41, 0, 0x44, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f}, bytes.Repeat([]byte{0x9f}, 1000)...)
	sqrts = append(sqrts, 0x39, 3, 0, 0x0b)
	tests := []struct {
		name  string
		funcs []testFunc
		n     int
		// want is the ticks, within one: the weight of a count may pass the
		// counter's end, and what it passes it by is not carried over.
		want int64
	}{
		// 1 for the loop, 1 + 15 for the fill, whose length is known: it
		// weighs with the loop.
		{"short fills", []testFunc{{"run", true, loopOf(fill(4095))}}, 2 * Period, 34},
		// Likewise, counted at the fill.
		{"short fills not constant", []testFunc{{"run", true, loopOf(fillNotConst(4095))}}, 2 * Period, 34},
		// 1 for the loop, 1 for its call, 3 for the leaf's entry (2049
		// bytes).
		{"large leaf", []testFunc{
			{"", false, append(append([]byte{0}, nops(2048)...), 0x0b)},
			{"run", true, loopOf([]byte{0x10, 0})},
		}, Period, 5},
		// 1 + 4 KiB: 5 for the loop.
		{"large loop", []testFunc{{"run", true, loopOf(nops(4096))}}, Period, 5},
		// 1 for the loop, 64 for its calls of a 1-byte leaf.
		{"leaf calls", []testFunc{
			{"", false, []byte{0, 0x0b}},
			{"run", true, loopOf(bytes.Repeat([]byte{0x10, 0}, 64))},
		}, Period, 65},
		// 1 for the loop, 480 for its calls of a leaf of 1,000 nops, which
		// its entry does not count: a tick each 35 turns. When a call
		// weighed nothing, each turn ran 480 leaves of a turn's worth of
		// code each, and with a leaf of slow instructions
		// (TestDeadlineAttackLeafCalls in the runtime's tests) a call with
		// a deadline of 200 ms ran 13 s.
		{"leaf calls of 1 KiB", []testFunc{
			{"", false, append(append([]byte{0}, nops(1000)...), 0x0b)},
			{"run", true, loopOf(bytes.Repeat([]byte{0x10, 0}, 480))},
		}, Period, Period / (Period/481 + 1)},
		// 1 for the loop, 1 for its call, 1 + 32 for the leaf's entry: its
		// 1,000 square roots weigh 32 bytes each. By its bytes alone, under
		// 1 KiB, the leaf went uncounted, and a loop of its calls ticked
		// 200 ms apart.
		{"leaf of square roots", []testFunc{
			{"", false, sqrts},
			{"run", true, loopOf([]byte{0x10, 0})},
		}, Period, 35},
		// 1 for the loop, 1 for its call, 1 + 200 for the leaf's entry:
		// memory.grow leaves compiled code, as a call does.
		{"leaf of memory.grow", []testFunc{
			{"", false, leafOf([]byte{0x41, 0, 0x40, 0, 0x1a}, 200)},
			{"run", true, loopOf([]byte{0x10, 0})},
		}, Period, 203},
		// Likewise ref.func (of run, which its export declares), 435 ns
		// each: by its bytes alone the leaf went uncounted, and a loop of
		// its calls ticked 1.2 s apart.
		{"leaf of ref.func", []testFunc{
			{"", false, leafOf([]byte{0xd2, 1, 0x1a}, 200)},
			{"run", true, loopOf([]byte{0x10, 0})},
		}, Period / 16, 203 / 16},
		// 1 for the loop, 1 for its bytes (320 loads of 6 bytes with their
		// address and drop: 1.9 KiB), 80 for its loads.
		{"loads", []testFunc{{"run", true, loopOf(bytes.Repeat([]byte{0x41, 0, 0x28, 2, 0, 0x1a}, 320))}}, Period, 82},
		// 3 for the loop (3.3 KiB), 257 fills of 16 each.
		{"dense fills", []testFunc{{"run", true, loopOf(denseFills)}}, 256, 256 * (3 + (DenseCounts+1)*16) / Period},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mod, ticks := ticking(t, testModule(tt.funcs...))
			if _, err := mod.ExportedFunction("run").Call(ctx, uint64(tt.n)); err != nil {
				t.Fatal(err)
			}
			if got := ticks.Load(); got < tt.want-1 || got > tt.want+1 {
				t.Errorf("%d ticks, want %d", got, tt.want)
			}
		})
	}
	t.Run("dense fills call", func(t *testing.T) {
		// The count inline is 30 bytes a fill, two blocks among them; the
		// call of the function that fills 3 in place of the fill's 3.
		module := testModule(testFunc{"run", true, loopOf(denseFills)})
		rewritten, err := Deadline(module)
		if err != nil {
			t.Fatal(err)
		}
		if grew := len(rewritten) - len(module); grew > 1024 {
			t.Errorf("%d bytes more for %d fills: the count is inline", grew, DenseCounts+1)
		}
	})
}

// TestDeadlineStretch runs a function of no loop whose body is 5,000 fills
// of 4 KiB, whose lengths are known: their weight is counted at its entry,
// before they run, and again every MaxStretch turns among them, so that the
// body is stopped part way. Counted at its entry alone, a body of 32,000
// stores to fresh pages ran 0.1 to 0.3 s with no check.
func TestDeadlineStretch(t *testing.T) {
	const fills = 5000
	body := append([]byte{0}, bytes.Repeat(fill(4096), fills)...)
	mod, ticks := ticking(t, testModule(testFunc{"run", true, append(body, 0x0b)}))
	if _, err := mod.ExportedFunction("run").Call(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	// A tick at the entry, and one each Period turns of the fills: what
	// a count passes the counter's end by is not carried over, up to a
	// stretch's weight at each.
	want := int64(1 + fills*(1+4096>>BulkShift)/Period)
	if got := ticks.Load(); got < want*9/10 || got > want+1 {
		t.Errorf("%d ticks, want %d", got, want)
	}
}

// TestDeadlineLabelNames drops the name section's label names, which the
// ifs of the count would leave naming the wrong blocks, and moves the
// function names.
func TestDeadlineLabelNames(t *testing.T) {
	module := testModule(testFunc{"run", true, loopOf(nil)})
	sub := func(id byte, payload []byte) []byte {
		return append(wasmbin.AppendULEB([]byte{id}, uint64(len(payload))), payload...)
	}
	functions := wasmbin.AppendName([]byte{1, 0}, "run")      // function 0: run
	labels := wasmbin.AppendName([]byte{1, 0, 1, 0}, "again") // function 0, label 0: again
	section := append(append(wasmbin.AppendName(nil, "name"), sub(1, functions)...), sub(3, labels)...)
	module = wasmbin.AppendSection(module, wasmbin.SectionCustom, section)
	rewritten, err := Deadline(module)
	if err != nil {
		t.Fatal(err)
	}
	var names []byte
	for s, err := range wasmbin.Sections(rewritten) {
		if err != nil {
			t.Fatal(err)
		}
		if s.ID == wasmbin.SectionCustom {
			names = s.Payload
		}
	}
	// function 1 (the tick is 0): run; no subsection 3.
	want := append(wasmbin.AppendName(nil, "name"), sub(1, wasmbin.AppendName([]byte{1, 1}, "run"))...)
	if !bytes.Equal(names, want) {
		t.Errorf("name section %q, want %q", names, want)
	}
}

// TestDeadlineLocalCounter calls a function that counts in a local (it has
// a loop) from one that counts in the global, many times: the turns the
// callee counts must reach the global whichever way it leaves (its end,
// return, br, br_if or br_table to the function's label), or no call would
// ever tick. And from a caller that counts in a local too, which must take
// the global back after each call.
func TestDeadlineLocalCounter(t *testing.T) {
	const turns, calls = 4096, 64
	dec := []byte{0x20, 0, 0x41, 1, 0x6b, 0x22, 0, 0x45} // local.tee 0 (local.get 0 - 1); i32.eqz
	loop := func(exit ...byte) []byte {
		b := append([]byte{0, 0x03, 0x40}, dec...)
		return append(append(b, exit...), 0x0b, 0x0b)
	}
	callees := map[string][]byte{
		"end":      append([]byte{0, 0x03, 0x40}, 0x20, 0, 0x41, 1, 0x6b, 0x22, 0, 0x0d, 0, 0x0b, 0x0b),
		"return":   loop(0x04, 0x40, 0x0f, 0x0b, 0x0c, 0),
		"br":       loop(0x04, 0x40, 0x0c, 2, 0x0b, 0x0c, 0),
		"br_if":    loop(0x0d, 1, 0x0c, 0),
		"br_table": loop(0x0e, 1, 0, 1),
	}
	callTurns := wasmbin.AppendSLEB([]byte{0x41}, turns)
	callTurns = append(callTurns, 0x10, 0)
	straight := []byte{0}
	for range calls {
		straight = append(straight, callTurns...)
	}
	straight = append(straight, 0x0b)
	run := func(t *testing.T, callee, caller []byte) {
		mod, ticks := ticking(t, testModule(testFunc{"", true, callee}, testFunc{"run", true, caller}))
		if _, err := mod.ExportedFunction("run").Call(context.Background(), calls); err != nil {
			t.Fatal(err)
		}
		if got, want := ticks.Load(), int64(turns*calls/Period); got < want-1 || got > want+1 {
			t.Errorf("%d ticks, want %d", got, want)
		}
	}
	for name, callee := range callees {
		t.Run(name, func(t *testing.T) { run(t, callee, straight) })
	}
	t.Run("caller loops", func(t *testing.T) { run(t, callees["end"], loopOf(callTurns)) })
}
