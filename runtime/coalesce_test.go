package runtime

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berm-dev/berm/internal/wasmbin"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// handSeg is a data segment of a hand-built module.
type handSeg struct {
	off      int32
	init     string
	passive  bool
	global   bool   // offset global.get of the imported env.g
	explicit bool   // encoded with flag 2, memory 0 named
	expr     []byte // an offset expression of its own, end included
}

// handModule builds a module that defines one memory of pages pages (none
// when pages is negative), exports it, and carries segs in its data section.
type handModule struct {
	pages      int
	segs       []handSeg
	dataCount  bool
	memoryInit bool // a function doing memory.init 0 and data.drop 0
}

func (m handModule) bytes() []byte {
	b := []byte(wasmbin.Header)
	b = wasmbin.AppendSection(b, wasmbin.SectionCustom, append(wasmbin.AppendName(nil, "before"), 1, 2, 3))
	for _, s := range m.segs {
		if s.global {
			imp := wasmbin.AppendName(wasmbin.AppendName([]byte{1}, "env"), "g")
			b = wasmbin.AppendSection(b, wasmbin.SectionImport, append(imp, 0x03, 0x7f, 0x00))
			break
		}
	}
	if m.memoryInit {
		b = wasmbin.AppendSection(b, wasmbin.SectionType, []byte{1, 0x60, 0, 0})
		b = wasmbin.AppendSection(b, wasmbin.SectionFunction, []byte{1, 0})
	}
	if m.pages >= 0 {
		b = wasmbin.AppendSection(b, wasmbin.SectionMemory, wasmbin.AppendULEB([]byte{1, 0}, uint64(m.pages)))
		b = wasmbin.AppendSection(b, wasmbin.SectionExport, append(wasmbin.AppendName([]byte{1}, "memory"), 0x02, 0))
	}
	if m.dataCount {
		b = wasmbin.AppendSection(b, wasmbin.SectionDataCount, wasmbin.AppendULEB(nil, uint64(len(m.segs))))
	}
	if m.memoryInit {
		body := []byte{0, 0x41, 0, 0x41, 0, 0x41, 0, 0xfc, 0x08, 0, 0, 0xfc, 0x09, 0, 0x0b}
		code := append(wasmbin.AppendULEB([]byte{1}, uint64(len(body))), body...)
		b = wasmbin.AppendSection(b, wasmbin.SectionCode, code)
	}
	data := wasmbin.AppendULEB(nil, uint64(len(m.segs)))
	for _, s := range m.segs {
		switch {
		case s.passive:
			data = append(data, 1)
		case s.explicit:
			data = append(data, 2, 0)
		default:
			data = append(data, 0)
		}
		switch {
		case s.passive:
		case s.expr != nil:
			data = append(data, s.expr...)
		case s.global:
			data = append(data, 0x23, 0, 0x0b)
		default:
			data = append(wasmbin.AppendSLEB(append(data, 0x41), int64(s.off)), 0x0b)
		}
		data = append(wasmbin.AppendULEB(data, uint64(len(s.init))), s.init...)
	}
	b = wasmbin.AppendSection(b, wasmbin.SectionData, data)
	return wasmbin.AppendSection(b, wasmbin.SectionCustom, append(wasmbin.AppendName(nil, "after"), 4, 5, 6))
}

// envModule exports an immutable i32 global g of value v.
func envModule(v int32) []byte {
	b := []byte(wasmbin.Header)
	b = wasmbin.AppendSection(b, wasmbin.SectionGlobal, append(wasmbin.AppendSLEB([]byte{1, 0x7f, 0, 0x41}, int64(v)), 0x0b))
	return wasmbin.AppendSection(b, wasmbin.SectionExport, append(wasmbin.AppendName([]byte{1}, "g"), 0x03, 0))
}

// instantiateWithEnv instantiates module the way berm does, next to an env
// module exporting g, and returns a copy of its whole memory.
func instantiateWithEnv(t testing.TB, module []byte, g int32) ([]byte, error) {
	t.Helper()
	ctx := context.Background()
	// Extended constant offsets on, to see them kept in their place.
	config := wazero.NewRuntimeConfigInterpreter().WithMemoryLimitPages(64).
		WithCoreFeatures(api.CoreFeaturesV2 | experimental.CoreFeaturesExtendedConst)
	r := wazero.NewRuntimeWithConfig(ctx, config)
	defer r.Close(ctx)
	if _, err := r.InstantiateWithConfig(ctx, envModule(g), wazero.NewModuleConfig().WithName("env")); err != nil {
		t.Fatal(err)
	}
	m, err := r.InstantiateWithConfig(ctx, module, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return nil, err
	}
	return wholeMemory(t, m), nil
}

func wholeMemory(t testing.TB, m api.Module) []byte {
	t.Helper()
	mem := m.Memory()
	if mem == nil {
		return nil
	}
	b, ok := mem.Read(0, mem.Size())
	if !ok {
		t.Fatal("memory: cannot read it whole")
	}
	return bytes.Clone(b)
}

func dataSegmentCount(t testing.TB, module []byte) int {
	t.Helper()
	md, ok := parseDataSection(module)
	if !ok {
		t.Fatal("data section: does not parse")
	}
	return len(md.segments)
}

// sectionsBut lists a module's sections, each whole, but those with id skip.
func sectionsBut(module []byte, skip byte) ([][]byte, bool) {
	var out [][]byte
	for sec, err := range wasmbin.Sections(module) {
		if err != nil {
			return nil, false
		}
		if sec.ID != skip {
			out = append(out, module[sec.Start:sec.End])
		}
	}
	return out, true
}

// checkSameMemory asserts that rewritten keeps every section of original but
// the data section, and that both instantiate to the same memory or both fail.
func checkSameMemory(t *testing.T, original, rewritten []byte, g int32) {
	t.Helper()
	a, _ := sectionsBut(original, 11)
	b, ok := sectionsBut(rewritten, 11)
	if !ok || len(a) != len(b) {
		t.Fatalf("sections: %d before, %d after", len(a), len(b))
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("section %d (id %d) changed", i, a[i][0])
		}
	}
	memA, errA := instantiateWithEnv(t, original, g)
	memB, errB := instantiateWithEnv(t, rewritten, g)
	if (errA == nil) != (errB == nil) {
		t.Fatalf("instantiate: original %v, rewritten %v", errA, errB)
	}
	if !bytes.Equal(memA, memB) {
		t.Fatalf("memory differs: %d bytes vs %d, first at %d", len(memA), len(memB), firstDiff(memA, memB))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func constSeg(off int32, init string) handSeg { return handSeg{off: off, init: init} }

func TestCoalesceData(t *testing.T) {
	const gap = coalesceGap
	tests := []struct {
		name     string
		module   handModule
		g        int32 // value of env.g
		segments int   // after; 0 when the module must be left as it is
		fails    bool  // instantiation fails, before and after
	}{
		{name: "overlap", module: handModule{pages: 1, segs: []handSeg{constSeg(0, "aaaa"), constSeg(2, "bbbb")}}, segments: 1},
		{name: "overlap, later segment lower", module: handModule{pages: 1, segs: []handSeg{constSeg(2, "bbbb"), constSeg(0, "aaaa")}}, segments: 1},
		{name: "contained", module: handModule{pages: 1, segs: []handSeg{constSeg(0, "aaaaaaaa"), constSeg(2, "bb"), constSeg(3, "c")}}, segments: 1},
		{name: "adjacent", module: handModule{pages: 1, segs: []handSeg{constSeg(0, "aa"), constSeg(2, "bb"), constSeg(4, "cc")}}, segments: 1},
		{name: "gap at threshold", module: handModule{pages: 1, segs: []handSeg{constSeg(0, "a"), constSeg(1+gap, "b")}}, segments: 1},
		{name: "gap over threshold", module: handModule{pages: 1, segs: []handSeg{constSeg(0, "a"), constSeg(2+gap, "b"), constSeg(3+gap, "c")}}, segments: 2},
		{name: "unsorted", module: handModule{pages: 1, segs: []handSeg{constSeg(300, "ccc"), constSeg(0, "a"), constSeg(100, "bb"), constSeg(299, "xy")}}, segments: 1},
		{name: "far apart", module: handModule{pages: 2, segs: []handSeg{constSeg(0, "a"), constSeg(1, "b"), constSeg(90000, "c"), constSeg(90001, "d")}}, segments: 2},
		{name: "empty segments", module: handModule{pages: 1, segs: []handSeg{constSeg(0, "a"), constSeg(10, ""), constSeg(20, "b"), constSeg(5000, ""), constSeg(65536, "")}}, segments: 3},
		{name: "passive interleaved", module: handModule{pages: 1, segs: []handSeg{
			constSeg(0, "a"), {passive: true, init: "p"}, constSeg(1, "b"), {passive: true, init: "q"}, constSeg(2, "c"),
		}}, segments: 3},
		{name: "global offset interleaved", g: 2, module: handModule{pages: 1, segs: []handSeg{
			constSeg(0, "aa"), constSeg(2, "aa"), {global: true, init: "GG"}, constSeg(3, "cc"), constSeg(5, "dd"), constSeg(8, "x"),
		}}, segments: 4},
		{name: "no zeros over a global segment", g: 10, module: handModule{pages: 1, segs: []handSeg{
			constSeg(0, "a"), {global: true, init: "GGGG"}, constSeg(8, "x"), constSeg(16, "y"), constSeg(0, "b"), constSeg(1, "c"),
		}}, segments: 5},
		{name: "global segment first", g: 1, module: handModule{pages: 1, segs: []handSeg{
			{global: true, init: "GG"}, constSeg(0, "a"), constSeg(1, "b"), constSeg(2, "c"),
		}}, segments: 2},
		{name: "global segment out of bounds", g: 65535, module: handModule{pages: 1, segs: []handSeg{
			constSeg(0, "a"), constSeg(1, "b"), {global: true, init: "GG"}, constSeg(2, "c"),
		}}, segments: 3, fails: true},
		{name: "extended constant offset", module: handModule{pages: 1, segs: []handSeg{
			constSeg(0, "a"), constSeg(1, "b"), {expr: []byte{0x41, 4, 0x41, 4, 0x6a, 0x0b}, init: "E"}, constSeg(8, "c"), constSeg(9, "d"),
		}}, segments: 3},
		{name: "memory named", module: handModule{pages: 1, segs: []handSeg{{explicit: true, init: "a"}, constSeg(1, "b"), constSeg(2, "c")}}, segments: 2},
		{name: "out of bounds", module: handModule{pages: 1, segs: []handSeg{constSeg(0, "a"), constSeg(1, "b"), constSeg(65535, "cc")}}, fails: true},
		{name: "empty segment out of bounds", module: handModule{pages: 1, segs: []handSeg{constSeg(0, "a"), constSeg(1, "b"), constSeg(65537, "")}}, fails: true},
		{name: "negative offset", module: handModule{pages: 1, segs: []handSeg{constSeg(-1, "a"), constSeg(0, "b"), constSeg(1, "c")}}, fails: true},
		{name: "up to memory's end", module: handModule{pages: 1, segs: []handSeg{constSeg(0, "a"), constSeg(1, "b"), constSeg(65534, "cc")}}, segments: 2},
		{name: "high offsets", module: handModule{pages: 64, segs: []handSeg{constSeg(4<<20-3, "a"), constSeg(4<<20-2, "bb")}}, segments: 1},
		{name: "no memory", module: handModule{pages: -1, segs: []handSeg{constSeg(0, "a"), constSeg(1, "b")}}, fails: true},
		{name: "data count", module: handModule{pages: 1, dataCount: true, segs: []handSeg{constSeg(0, "a"), constSeg(1, "b")}}},
		{name: "memory.init", module: handModule{pages: 1, dataCount: true, memoryInit: true, segs: []handSeg{constSeg(0, "a"), constSeg(1, "b")}}},
		{name: "one segment", module: handModule{pages: 1, segs: []handSeg{constSeg(0, "a")}}},
		{name: "no segments", module: handModule{pages: 1}},
		{name: "passive only", module: handModule{pages: 1, segs: []handSeg{{passive: true, init: "p"}, {passive: true, init: "q"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			original := tt.module.bytes()
			rewritten := coalesceData(original)
			switch {
			case tt.segments == 0 && !bytes.Equal(rewritten, original):
				t.Fatalf("rewritten, to %d segments; want it left as it is", dataSegmentCount(t, rewritten))
			case tt.segments != 0 && dataSegmentCount(t, rewritten) != tt.segments:
				t.Fatalf("%d segments, want %d", dataSegmentCount(t, rewritten), tt.segments)
			}
			if _, err := instantiateWithEnv(t, original, tt.g); (err != nil) != tt.fails {
				t.Fatalf("original: instantiate: %v, want failure %v", err, tt.fails)
			}
			checkSameMemory(t, original, rewritten, tt.g)
		})
	}
}

// TestCoalesceOutOfBounds rewrites modules whose segments overrun memory,
// which coalesceData leaves alone, to see that the merged segments fail
// exactly when an original one does.
func TestCoalesceOutOfBounds(t *testing.T) {
	const end = 65536
	tests := []struct {
		name  string
		segs  []handSeg
		fails bool
	}{
		{"last overruns", []handSeg{constSeg(0, "a"), constSeg(1, "b"), constSeg(end-1, "cc")}, true},
		{"first overruns", []handSeg{constSeg(end-1, "cc"), constSeg(0, "a"), constSeg(1, "b")}, true},
		{"overlapped one overruns", []handSeg{constSeg(end-4, "aaa"), constSeg(end-3, "bbbb"), constSeg(end-4, "cccc")}, true},
		{"empty one past the end", []handSeg{constSeg(0, "a"), constSeg(1, "b"), constSeg(end+1, "")}, true},
		{"empty one past the end, near others", []handSeg{constSeg(end-2, "a"), constSeg(end-1, "b"), constSeg(end+1, "")}, true},
		{"empty one at the end", []handSeg{constSeg(end-2, "a"), constSeg(end-1, "b"), constSeg(end, "")}, false},
		{"last ends at the end", []handSeg{constSeg(end-3, "a"), constSeg(end-2, "bb")}, false},
		{"wraps around", []handSeg{constSeg(0, "a"), constSeg(1, "b"), constSeg(-1, "cc")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			original := handModule{pages: 1, segs: tt.segs}.bytes()
			if tt.fails && !bytes.Equal(coalesceData(original), original) {
				t.Fatal("coalesceData rewrote a module that fails")
			}
			rewritten, ok := coalesce(original, coalesceGap, false)
			if !ok {
				t.Fatal("not rewritten")
			}
			if n := dataSegmentCount(t, rewritten); n >= len(tt.segs) {
				t.Fatalf("%d segments", n)
			}
			if _, err := instantiateWithEnv(t, original, 0); (err != nil) != tt.fails {
				t.Fatalf("original: instantiate: %v, want failure %v", err, tt.fails)
			}
			checkSameMemory(t, original, rewritten, 0)
		})
	}
}

// TestCoalesceRandom compares memory after instantiation for random modules:
// overlapping, unsorted, passive and global segments, some out of bounds.
func TestCoalesceRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 300
	if testing.Short() {
		n = 50
	}
	rewrites := 0
	for range n {
		var segs []handSeg
		span := int32(1) << rng.IntN(17)
		for range 1 + rng.IntN(40) {
			s := handSeg{off: rng.Int32N(span), init: string(nonZeroBytes(rng, rng.IntN(16)))}
			switch rng.IntN(10) {
			case 0:
				s.passive = true
			case 1:
				s.global = true
			}
			segs = append(segs, s)
		}
		original := handModule{pages: 1, segs: segs}.bytes()
		g := rng.Int32N(span)
		for _, gap := range []uint64{0, 16, coalesceGap} {
			for _, keep := range []bool{true, false} {
				if rewritten, ok := coalesce(original, gap, keep); ok {
					checkSameMemory(t, original, rewritten, g)
					rewrites++
				}
			}
		}
	}
	if rewrites < n {
		t.Fatalf("%d rewrites of %d modules", rewrites, n)
	}
}

func nonZeroBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(1 + rng.IntN(255))
	}
	return b
}

func helloImage(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", "hello", "hello.wasm"))
	if err != nil {
		tb.Skip("examples/hello/hello.wasm:", err)
	}
	return b
}

// helloRuntime is a wazero runtime configured as berm's, with the imports
// hello.wasm needs: WASI and a berm.syscall that does nothing.
func helloRuntime(tb testing.TB, config wazero.RuntimeConfig) wazero.Runtime {
	tb.Helper()
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, config.WithCloseOnContextDone(true).WithMemoryLimitPages(DefaultMemoryLimit/PageSize))
	tb.Cleanup(func() { r.Close(ctx) })
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	_, err := r.NewHostModuleBuilder("berm").NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {}),
			[]api.ValueType{api.ValueTypeI64, api.ValueTypeI32, api.ValueTypeI32},
			[]api.ValueType{api.ValueTypeI64}).
		Export("syscall").Instantiate(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func TestCoalesceHello(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a 3.4 MB module twice")
	}
	original := helloImage(t)
	rewritten := coalesceData(original)
	before, after := dataSegmentCount(t, original), dataSegmentCount(t, rewritten)
	t.Logf("segments: %d before, %d after; size: %d bytes before, %+d after", before, after, len(original), len(rewritten)-len(original))
	if after > 8 {
		t.Errorf("%d segments after", after)
	}
	a, _ := sectionsBut(original, 11)
	b, _ := sectionsBut(rewritten, 11)
	if len(a) != len(b) {
		t.Fatalf("sections: %d before, %d after", len(a), len(b))
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("section %d (id %d) changed", i, a[i][0])
		}
	}
	ctx := context.Background()
	r := helloRuntime(t, wazero.NewRuntimeConfig())
	config := wazero.NewModuleConfig().WithName("").WithStartFunctions()
	var mems [][]byte
	for _, image := range [][]byte{original, rewritten} {
		compiled, err := r.CompileModule(ctx, image)
		if err != nil {
			t.Fatal(err)
		}
		m, err := r.InstantiateModule(ctx, compiled, config)
		if err != nil {
			t.Fatal(err)
		}
		mems = append(mems, wholeMemory(t, m))
		// Go's runtime starts up on what the segments left: its type
		// data, its function tables.
		if _, err := m.ExportedFunction("_initialize").Call(ctx); err != nil {
			t.Fatal(err)
		}
		m.Close(ctx)
	}
	if !bytes.Equal(mems[0], mems[1]) {
		t.Fatalf("memory differs, first at %d", firstDiff(mems[0], mems[1]))
	}
}

func FuzzCoalesceData(f *testing.F) {
	for _, pattern := range []string{"../testdata/*.wasm", "../testdata/broken/*.wasm", "../examples/hello/hello.wasm"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add(handModule{pages: 1, segs: []handSeg{constSeg(0, "aaaa"), constSeg(2, "bb"), constSeg(-1, "")}}.bytes())
	f.Add(handModule{pages: 1, segs: []handSeg{constSeg(0, "a"), {passive: true, init: "p"}, {global: true, init: "G"}, constSeg(1, "b")}}.bytes())
	f.Add(handModule{pages: 1, dataCount: true, memoryInit: true, segs: []handSeg{constSeg(0, "a"), constSeg(1, "b")}}.bytes())
	f.Fuzz(func(t *testing.T, in []byte) {
		original := bytes.Clone(in)
		out := coalesceData(in)
		if !bytes.Equal(in, original) {
			t.Fatal("input modified")
		}
		if !bytes.Equal(out, in) {
			checkEquivalent(t, in, out)
		}
		// Merged segments that overrun memory, which coalesceData never
		// writes, still fail exactly when an original one does.
		if out, ok := coalesce(in, coalesceGap, false); ok {
			checkEquivalent(t, in, out)
		}
	})
}

// checkEquivalent asserts that both modules compile or neither does, and
// that both instantiate to the same memory or neither instantiates.
func checkEquivalent(t *testing.T, in, out []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCloseOnContextDone(true).WithMemoryLimitPages(256))
	defer r.Close(ctx)
	cin, errIn := r.CompileModule(ctx, in)
	cout, errOut := r.CompileModule(ctx, out)
	if (errIn == nil) != (errOut == nil) {
		t.Fatalf("compile: original %v, rewritten %v", errIn, errOut)
	}
	if errIn != nil {
		return
	}
	config := wazero.NewModuleConfig().WithName("").WithStartFunctions()
	var mems [][]byte
	var errs []error
	for _, compiled := range []wazero.CompiledModule{cin, cout} {
		m, err := r.InstantiateModule(ctx, compiled, config)
		errs = append(errs, err)
		if err == nil {
			mems = append(mems, wholeMemory(t, m))
		}
	}
	if ctx.Err() != nil {
		return // a start function that runs on
	}
	if (errs[0] == nil) != (errs[1] == nil) {
		t.Fatalf("instantiate: original %v, rewritten %v", errs[0], errs[1])
	}
	if len(mems) == 2 && !bytes.Equal(mems[0], mems[1]) {
		t.Fatalf("memory differs, first at %d", firstDiff(mems[0], mems[1]))
	}
}

// BenchmarkInstantiateHello instantiates hello.wasm and closes it, as a call
// does before running anything, with its original data section and with the
// rewritten one.
func BenchmarkInstantiateHello(b *testing.B) {
	original := helloImage(b)
	ctx := context.Background()
	r := helloRuntime(b, wazero.NewRuntimeConfig())
	config := wazero.NewModuleConfig().WithName("").WithStartFunctions()
	for _, bc := range []struct {
		name  string
		image []byte
	}{
		{"original", original},
		{"coalesced", coalesceData(original)},
	} {
		compiled, err := r.CompileModule(ctx, bc.image)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m, err := r.InstantiateModule(ctx, compiled, config)
				if err != nil {
					b.Fatal(err)
				}
				m.Close(ctx)
			}
		})
	}
}

// BenchmarkCompileHello compiles hello.wasm in a fresh runtime, as a deploy
// does, with and without the rewrite (whose own time counts): uncached, and
// from a warm compilation cache.
func BenchmarkCompileHello(b *testing.B) {
	original := helloImage(b)
	ctx := context.Background()
	for _, cached := range []bool{false, true} {
		config := wazero.NewRuntimeConfig()
		if cached {
			cache, err := wazero.NewCompilationCacheWithDir(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			config = config.WithCompilationCache(cache)
		}
		for _, bc := range []struct {
			name    string
			rewrite func([]byte) []byte
		}{
			{"original", func(b []byte) []byte { return b }},
			{"coalesced", coalesceData},
		} {
			compile := func(b *testing.B) {
				r := wazero.NewRuntimeWithConfig(ctx, config)
				defer r.Close(ctx)
				if _, err := r.CompileModule(ctx, bc.rewrite(original)); err != nil {
					b.Fatal(err)
				}
			}
			name := "uncached/" + bc.name
			if cached {
				name = "cached/" + bc.name
				compile(b)
			}
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					compile(b)
				}
			})
		}
	}
}

func BenchmarkCoalesceData(b *testing.B) {
	original := helloImage(b)
	b.SetBytes(int64(len(original)))
	b.ReportAllocs()
	for b.Loop() {
		coalesceData(original)
	}
}
