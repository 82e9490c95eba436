package runtime

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// testSeg is a data segment of a hand-built module.
type testSeg struct {
	off      int32
	init     string
	passive  bool
	global   bool   // offset global.get of the imported env.g
	explicit bool   // encoded with flag 2, memory 0 named
	expr     []byte // an offset expression of its own, end included
}

// testModule builds a module that defines one memory of pages pages (none
// when pages is negative), exports it, and carries segs in its data section.
type testModule struct {
	pages      int
	segs       []testSeg
	dataCount  bool
	memoryInit bool // a function doing memory.init 0 and data.drop 0
}

func section(id byte, content []byte) []byte {
	return append(appendU32([]byte{id}, uint32(len(content))), content...)
}

func name(s string) []byte { return append(appendU32(nil, uint32(len(s))), s...) }

func (m testModule) bytes() []byte {
	b := bytes.Clone(wasmHeader)
	b = append(b, section(0, append(name("before"), 1, 2, 3))...)
	for _, s := range m.segs {
		if s.global {
			imp := appendU32(nil, 1)
			imp = append(append(append(imp, name("env")...), name("g")...), 0x03, 0x7f, 0x00)
			b = append(b, section(2, imp)...)
			break
		}
	}
	if m.memoryInit {
		b = append(b, section(1, []byte{1, 0x60, 0, 0})...)
		b = append(b, section(3, []byte{1, 0})...)
	}
	if m.pages >= 0 {
		b = append(b, section(5, appendU32([]byte{1, 0}, uint32(m.pages)))...)
		b = append(b, section(7, append(appendU32(nil, 1), append(name("memory"), 0x02, 0)...))...)
	}
	if m.dataCount {
		b = append(b, section(12, appendU32(nil, uint32(len(m.segs))))...)
	}
	if m.memoryInit {
		body := []byte{0, 0x41, 0, 0x41, 0, 0x41, 0, 0xfc, 0x08, 0, 0, 0xfc, 0x09, 0, 0x0b}
		b = append(b, section(10, append([]byte{1}, append(appendU32(nil, uint32(len(body))), body...)...))...)
	}
	data := appendU32(nil, uint32(len(m.segs)))
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
			data = append(appendS32(append(data, 0x41), s.off), 0x0b)
		}
		data = append(appendU32(data, uint32(len(s.init))), s.init...)
	}
	b = append(b, section(11, data)...)
	return append(b, section(0, append(name("after"), 4, 5, 6))...)
}

// envModule exports an immutable i32 global g of value v.
func envModule(v int32) []byte {
	b := bytes.Clone(wasmHeader)
	b = append(b, section(6, append(appendS32([]byte{1, 0x7f, 0, 0x41}, v), 0x0b))...)
	return append(b, section(7, append(appendU32(nil, 1), append(name("g"), 0x03, 0)...))...)
}

// instantiate instantiates module the way berm does, next to an env module
// exporting g, and returns a copy of its whole memory.
func instantiate(t testing.TB, module []byte, g int32) ([]byte, error) {
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
	return memoryOf(t, m), nil
}

func memoryOf(t testing.TB, m api.Module) []byte {
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

func segmentCount(t testing.TB, module []byte) int {
	t.Helper()
	md, ok := parseData(module)
	if !ok {
		t.Fatal("data section: does not parse")
	}
	return len(md.segments)
}

// sectionsBut lists a module's sections, each whole, but those with id skip.
func sectionsBut(module []byte, skip byte) ([][]byte, bool) {
	var out [][]byte
	r := &reader{b: module, i: len(wasmHeader)}
	for r.i < len(module) {
		start := r.i
		id := r.byte()
		r.bytes(r.u32())
		if r.bad {
			return nil, false
		}
		if id != skip {
			out = append(out, module[start:r.i])
		}
	}
	return out, true
}

// checkSame asserts that rewritten keeps every section of original but the
// data section, and that both instantiate to the same memory or both fail.
func checkSame(t *testing.T, original, rewritten []byte, g int32) {
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
	memA, errA := instantiate(t, original, g)
	memB, errB := instantiate(t, rewritten, g)
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

func c(off int32, init string) testSeg { return testSeg{off: off, init: init} }

func TestCoalesceData(t *testing.T) {
	const gap = coalesceGap
	tests := []struct {
		name     string
		module   testModule
		g        int32 // value of env.g
		segments int   // after; 0 when the module must be left as it is
		fails    bool  // instantiation fails, before and after
	}{
		{name: "overlap", module: testModule{pages: 1, segs: []testSeg{c(0, "aaaa"), c(2, "bbbb")}}, segments: 1},
		{name: "overlap, later segment lower", module: testModule{pages: 1, segs: []testSeg{c(2, "bbbb"), c(0, "aaaa")}}, segments: 1},
		{name: "contained", module: testModule{pages: 1, segs: []testSeg{c(0, "aaaaaaaa"), c(2, "bb"), c(3, "c")}}, segments: 1},
		{name: "adjacent", module: testModule{pages: 1, segs: []testSeg{c(0, "aa"), c(2, "bb"), c(4, "cc")}}, segments: 1},
		{name: "gap at threshold", module: testModule{pages: 1, segs: []testSeg{c(0, "a"), c(1+gap, "b")}}, segments: 1},
		{name: "gap over threshold", module: testModule{pages: 1, segs: []testSeg{c(0, "a"), c(2+gap, "b"), c(3+gap, "c")}}, segments: 2},
		{name: "unsorted", module: testModule{pages: 1, segs: []testSeg{c(300, "ccc"), c(0, "a"), c(100, "bb"), c(299, "xy")}}, segments: 1},
		{name: "far apart", module: testModule{pages: 2, segs: []testSeg{c(0, "a"), c(1, "b"), c(90000, "c"), c(90001, "d")}}, segments: 2},
		{name: "empty segments", module: testModule{pages: 1, segs: []testSeg{c(0, "a"), c(10, ""), c(20, "b"), c(5000, ""), c(65536, "")}}, segments: 3},
		{name: "passive interleaved", module: testModule{pages: 1, segs: []testSeg{
			c(0, "a"), {passive: true, init: "p"}, c(1, "b"), {passive: true, init: "q"}, c(2, "c"),
		}}, segments: 3},
		{name: "global offset interleaved", g: 2, module: testModule{pages: 1, segs: []testSeg{
			c(0, "aa"), c(2, "aa"), {global: true, init: "GG"}, c(3, "cc"), c(5, "dd"), c(8, "x"),
		}}, segments: 4},
		{name: "no zeros over a global segment", g: 10, module: testModule{pages: 1, segs: []testSeg{
			c(0, "a"), {global: true, init: "GGGG"}, c(8, "x"), c(16, "y"), c(0, "b"), c(1, "c"),
		}}, segments: 5},
		{name: "global segment first", g: 1, module: testModule{pages: 1, segs: []testSeg{
			{global: true, init: "GG"}, c(0, "a"), c(1, "b"), c(2, "c"),
		}}, segments: 2},
		{name: "global segment out of bounds", g: 65535, module: testModule{pages: 1, segs: []testSeg{
			c(0, "a"), c(1, "b"), {global: true, init: "GG"}, c(2, "c"),
		}}, segments: 3, fails: true},
		{name: "extended constant offset", module: testModule{pages: 1, segs: []testSeg{
			c(0, "a"), c(1, "b"), {expr: []byte{0x41, 4, 0x41, 4, 0x6a, 0x0b}, init: "E"}, c(8, "c"), c(9, "d"),
		}}, segments: 3},
		{name: "memory named", module: testModule{pages: 1, segs: []testSeg{{explicit: true, init: "a"}, c(1, "b"), c(2, "c")}}, segments: 2},
		{name: "out of bounds", module: testModule{pages: 1, segs: []testSeg{c(0, "a"), c(1, "b"), c(65535, "cc")}}, fails: true},
		{name: "empty segment out of bounds", module: testModule{pages: 1, segs: []testSeg{c(0, "a"), c(1, "b"), c(65537, "")}}, fails: true},
		{name: "negative offset", module: testModule{pages: 1, segs: []testSeg{c(-1, "a"), c(0, "b"), c(1, "c")}}, fails: true},
		{name: "up to memory's end", module: testModule{pages: 1, segs: []testSeg{c(0, "a"), c(1, "b"), c(65534, "cc")}}, segments: 2},
		{name: "high offsets", module: testModule{pages: 64, segs: []testSeg{c(4<<20-3, "a"), c(4<<20-2, "bb")}}, segments: 1},
		{name: "no memory", module: testModule{pages: -1, segs: []testSeg{c(0, "a"), c(1, "b")}}, fails: true},
		{name: "data count", module: testModule{pages: 1, dataCount: true, segs: []testSeg{c(0, "a"), c(1, "b")}}},
		{name: "memory.init", module: testModule{pages: 1, dataCount: true, memoryInit: true, segs: []testSeg{c(0, "a"), c(1, "b")}}},
		{name: "one segment", module: testModule{pages: 1, segs: []testSeg{c(0, "a")}}},
		{name: "no segments", module: testModule{pages: 1}},
		{name: "passive only", module: testModule{pages: 1, segs: []testSeg{{passive: true, init: "p"}, {passive: true, init: "q"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			original := tt.module.bytes()
			rewritten := coalesceData(original)
			switch {
			case tt.segments == 0 && !bytes.Equal(rewritten, original):
				t.Fatalf("rewritten, to %d segments; want it left as it is", segmentCount(t, rewritten))
			case tt.segments != 0 && segmentCount(t, rewritten) != tt.segments:
				t.Fatalf("%d segments, want %d", segmentCount(t, rewritten), tt.segments)
			}
			if _, err := instantiate(t, original, tt.g); (err != nil) != tt.fails {
				t.Fatalf("original: instantiate: %v, want failure %v", err, tt.fails)
			}
			checkSame(t, original, rewritten, tt.g)
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
		segs  []testSeg
		fails bool
	}{
		{"last overruns", []testSeg{c(0, "a"), c(1, "b"), c(end-1, "cc")}, true},
		{"first overruns", []testSeg{c(end-1, "cc"), c(0, "a"), c(1, "b")}, true},
		{"overlapped one overruns", []testSeg{c(end-4, "aaa"), c(end-3, "bbbb"), c(end-4, "cccc")}, true},
		{"empty one past the end", []testSeg{c(0, "a"), c(1, "b"), c(end+1, "")}, true},
		{"empty one past the end, near others", []testSeg{c(end-2, "a"), c(end-1, "b"), c(end+1, "")}, true},
		{"empty one at the end", []testSeg{c(end-2, "a"), c(end-1, "b"), c(end, "")}, false},
		{"last ends at the end", []testSeg{c(end-3, "a"), c(end-2, "bb")}, false},
		{"wraps around", []testSeg{c(0, "a"), c(1, "b"), c(-1, "cc")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			original := testModule{pages: 1, segs: tt.segs}.bytes()
			if tt.fails && !bytes.Equal(coalesceData(original), original) {
				t.Fatal("coalesceData rewrote a module that fails")
			}
			rewritten, ok := coalesce(original, coalesceGap, false)
			if !ok {
				t.Fatal("not rewritten")
			}
			if n := segmentCount(t, rewritten); n >= len(tt.segs) {
				t.Fatalf("%d segments", n)
			}
			if _, err := instantiate(t, original, 0); (err != nil) != tt.fails {
				t.Fatalf("original: instantiate: %v, want failure %v", err, tt.fails)
			}
			checkSame(t, original, rewritten, 0)
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
		var segs []testSeg
		span := int32(1) << rng.IntN(17)
		for range 1 + rng.IntN(40) {
			s := testSeg{off: rng.Int32N(span), init: string(randBytes(rng, rng.IntN(16)))}
			switch rng.IntN(10) {
			case 0:
				s.passive = true
			case 1:
				s.global = true
			}
			segs = append(segs, s)
		}
		original := testModule{pages: 1, segs: segs}.bytes()
		g := rng.Int32N(span)
		for _, gap := range []uint64{0, 16, coalesceGap} {
			for _, keep := range []bool{true, false} {
				if rewritten, ok := coalesce(original, gap, keep); ok {
					checkSame(t, original, rewritten, g)
					rewrites++
				}
			}
		}
	}
	if rewrites < n {
		t.Fatalf("%d rewrites of %d modules", rewrites, n)
	}
}

func randBytes(rng *rand.Rand, n int) []byte {
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
	before, after := segmentCount(t, original), segmentCount(t, rewritten)
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
		mems = append(mems, memoryOf(t, m))
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
	f.Add(testModule{pages: 1, segs: []testSeg{c(0, "aaaa"), c(2, "bb"), c(-1, "")}}.bytes())
	f.Add(testModule{pages: 1, segs: []testSeg{c(0, "a"), {passive: true, init: "p"}, {global: true, init: "G"}, c(1, "b")}}.bytes())
	f.Add(testModule{pages: 1, dataCount: true, memoryInit: true, segs: []testSeg{c(0, "a"), c(1, "b")}}.bytes())
	f.Fuzz(func(t *testing.T, in []byte) {
		original := bytes.Clone(in)
		out := coalesceData(in)
		if !bytes.Equal(in, original) {
			t.Fatal("input modified")
		}
		if bytes.Equal(out, in) {
			return
		}
		if _, ok := coalesce(in, coalesceGap, true); !ok {
			t.Fatal("coalesceData rewrote what coalesce does not")
		}
		// Both compile or neither does; both instantiate to the same memory
		// or neither instantiates.
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
				mems = append(mems, memoryOf(t, m))
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
	})
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
// without a cache does, with and without the rewrite (whose own time counts).
func BenchmarkCompileHello(b *testing.B) {
	original := helloImage(b)
	ctx := context.Background()
	for _, bc := range []struct {
		name    string
		rewrite func([]byte) []byte
	}{
		{"original", func(b []byte) []byte { return b }},
		{"coalesced", coalesceData},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				r := wazero.NewRuntime(ctx)
				if _, err := r.CompileModule(ctx, bc.rewrite(original)); err != nil {
					b.Fatal(err)
				}
				r.Close(ctx)
			}
		})
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
