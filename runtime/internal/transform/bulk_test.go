package transform

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/berm-dev/berm/internal/wasmbin"
)

// bulkModule is a module of pages of memory whose exports do one bulk
// operation each, of their parameters, so that the rewrite cannot tell
// their lengths: fill (d, v, n), copy (d, s, n), init (d, s, n) of data
// segment 0, passive and segLong bytes long, shortinit of segment 1, 100
// bytes; and drop, which drops segment 0.
func bulkModule(pages uint32) []byte {
	b := []byte(wasmbin.Header)
	// (i32 i32 i32) -> (), () -> ()
	b = wasmbin.AppendSection(b, wasmbin.SectionType, []byte{2, 0x60, 3, 0x7f, 0x7f, 0x7f, 0, 0x60, 0, 0})
	b = wasmbin.AppendSection(b, wasmbin.SectionFunction, []byte{5, 0, 0, 0, 0, 1})
	b = wasmbin.AppendSection(b, wasmbin.SectionMemory, wasmbin.AppendULEB([]byte{1, 0}, uint64(pages)))
	exports := append(wasmbin.AppendName([]byte{6}, "memory"), 2, 0)
	for i, name := range []string{"fill", "copy", "init", "shortinit", "drop"} {
		exports = append(wasmbin.AppendName(exports, name), 0, byte(i))
	}
	b = wasmbin.AppendSection(b, wasmbin.SectionExport, exports)
	b = wasmbin.AppendSection(b, wasmbin.SectionDataCount, []byte{2})
	args := []byte{0, 0x20, 0, 0x20, 1, 0x20, 2} // no locals; local.get 0, 1, 2
	bodies := [][]byte{
		append(args, 0xfc, 11, 0, 0x0b),
		append(args, 0xfc, 10, 0, 0, 0x0b),
		append(args, 0xfc, 8, 0, 0, 0x0b),
		append(args, 0xfc, 8, 1, 0, 0x0b),
		{0, 0xfc, 9, 0, 0x0b},
	}
	code := []byte{byte(len(bodies))}
	for _, body := range bodies {
		code = append(wasmbin.AppendULEB(code, uint64(len(body))), body...)
	}
	b = wasmbin.AppendSection(b, wasmbin.SectionCode, code)
	data := []byte{2, 1}
	data = append(wasmbin.AppendULEB(data, segLong), segment(segLong)...)
	data = append(append(data, 1, 100), segment(100)...)
	return wasmbin.AppendSection(b, wasmbin.SectionData, data)
}

// segLong is the length of bulkModule's long segment: three BulkChunks and
// some.
const segLong = 3*BulkChunk + 4321

// segment is n bytes of a pattern unlike pattern's.
func segment(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}

// pattern is n bytes, none of them like its neighbours, to copy about.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i ^ i>>8 ^ i>>16)
	}
	return b
}

// TestDeadlineBulkCut does long bulk operations, which the rewrite cuts into
// BulkChunk bytes at a time, and short ones, in and out of bounds, with the
// module before the rewrite and after: each must trap or not as the
// original does, and leave the same memory. An operation that traps writes
// nothing; a copy over its own source, either way, reads each byte before
// it writes it.
func TestDeadlineBulkCut(t *testing.T) {
	const pages = 8
	const size = pages << 16
	const c = BulkChunk
	type op struct {
		fn      string
		a, b, n uint32
	}
	tests := []struct {
		name  string
		ops   []op
		traps bool
	}{
		{"fill", []op{{"fill", 100, 0xab, 3*c + 17}}, false},
		{"fill of chunks", []op{{"fill", 0, 1, 2 * c}}, false},
		{"fill of a chunk and a byte", []op{{"fill", 5, 2, c + 1}}, false},
		{"fill of a chunk", []op{{"fill", 5, 2, c}}, false},
		{"fill to the end", []op{{"fill", size - 2*c - 3, 3, 2*c + 3}}, false},
		{"fill of all", []op{{"fill", 0, 4, size}}, false},
		{"fill past the end by a byte", []op{{"fill", size - 2*c - 2, 5, 2*c + 3}}, true},
		{"fill past 4 GiB", []op{{"fill", 0xffff0000, 6, 0x20000}}, true},
		{"fill of 2 GiB", []op{{"fill", 0, 7, 1 << 31}}, true},
		{"fill of none past the end", []op{{"fill", size + 1, 8, 0}}, true},
		{"copy up over itself", []op{{"copy", 1000, 0, 3*c + 5}}, false},
		{"copy down over itself", []op{{"copy", 0, 1000, 3*c + 5}}, false},
		{"copy up by a byte", []op{{"copy", 1, 0, size - 1}}, false},
		{"copy down by a byte", []op{{"copy", 0, 1, size - 1}}, false},
		{"copy up by a chunk and a byte", []op{{"copy", c + 1, 0, 2*c + 9}}, false},
		{"copy onto itself", []op{{"copy", 777, 777, 2*c + 1}}, false},
		{"copy apart", []op{{"copy", 300000, 10, 2 * c}}, false},
		{"copy of a chunk and a byte", []op{{"copy", 3, 70000, c + 1}}, false},
		{"copy from past the end", []op{{"copy", 0, size - 2*c, 2*c + 1}}, true},
		{"copy to past the end", []op{{"copy", size - 2*c, 0, 2*c + 1}}, true},
		{"copy from past 4 GiB", []op{{"copy", 0, 0xfffff000, 0x20000}}, true},
		{"copy to past 4 GiB", []op{{"copy", 0xfffff000, 0, 0x20000}}, true},
		{"init", []op{{"init", 10, 3, segLong - 3}}, false},
		{"init to the segment's end", []op{{"init", 0, segLong - c - 1, c + 1}}, false},
		{"init past the segment's end", []op{{"init", 0, segLong - c - 1, c + 2}}, true},
		{"init to past the end", []op{{"init", size - c - 1, 0, c + 2}}, true},
		{"init past 4 GiB", []op{{"init", 0xffff0000, 0, 0x20000}}, true},
		{"init after drop", []op{{"drop", 0, 0, 0}, {"init", 0, 0, c + 1}}, true},
		{"init of none after drop", []op{{"drop", 0, 0, 0}, {"init", 0, 0, 0}}, false},
		{"init of a short segment", []op{{"shortinit", 0, 0, c + 1}}, true},
	}
	module := bulkModule(pages)
	rewritten, err := Deadline(module)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wz := wazero.NewRuntime(ctx)
	defer wz.Close(ctx)
	var stop atomic.Bool
	var ticks atomic.Int64
	tickHost(t, wz, &stop, &ticks)
	compile := func(b []byte) wazero.CompiledModule {
		compiled, err := wz.CompileModule(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return compiled
	}
	original, cut := compile(module), compile(rewritten)
	// run does ops in a new instance of compiled, its memory the pattern,
	// and returns its memory after and the error of the op that failed.
	run := func(compiled wazero.CompiledModule, ops []op) ([]byte, error) {
		mod, err := wz.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName(""))
		if err != nil {
			t.Fatal(err)
		}
		defer mod.Close(ctx)
		mod.Memory().Write(0, pattern(size))
		for _, o := range ops {
			params := []uint64{api.EncodeU32(o.a), api.EncodeU32(o.b), api.EncodeU32(o.n)}
			if o.fn == "drop" {
				params = nil
			}
			if _, err = mod.ExportedFunction(o.fn).Call(ctx, params...); err != nil {
				break
			}
		}
		mem, _ := mod.Memory().Read(0, size)
		return bytes.Clone(mem), err
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, wantErr := run(original, tt.ops)
			got, err := run(cut, tt.ops)
			if (wantErr != nil) != tt.traps {
				t.Fatalf("the original: %v, want a trap %v", wantErr, tt.traps)
			}
			if (err == nil) != (wantErr == nil) || err != nil && !strings.Contains(err.Error(), "out of bounds") {
				t.Fatalf("got %v, want the original's %v", err, wantErr)
			}
			if !bytes.Equal(got, want) {
				i := 0
				for got[i] == want[i] {
					i++
				}
				t.Errorf("memory differs from the original's first at %d: %d, want %d", i, got[i], want[i])
			}
		})
	}
}

// TestDeadlineBulkStops does one memory.fill, memory.copy each way and
// memory.init, each of many BulkChunks, with the counter set to run out at
// the fourth chunk's count and a tick that traps: the operation must stop
// there, three chunks written. As one instruction, counted before it, it
// ran to its end: a fill of 128 MiB of fresh memory, half a second past a
// deadline of 100 ms.
func TestDeadlineBulkStops(t *testing.T) {
	const pages = 16
	const size = pages << 16
	const chunks = 3
	rewritten, err := Deadline(bulkModule(pages))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wz := wazero.NewRuntime(ctx)
	defer wz.Close(ctx)
	var stop atomic.Bool
	var ticks atomic.Int64
	stop.Store(true)
	tickHost(t, wz, &stop, &ticks)
	compiled, err := wz.CompileModule(ctx, rewritten)
	if err != nil {
		t.Fatal(err)
	}
	// Memory starts as byte(i) at i, but for fill's.
	at := func(i int) byte { return byte(i) }
	tests := []struct {
		name    string
		fn      string
		a, b, n uint32
		written func(mem []byte) int // how many bytes the operation wrote
	}{
		{"fill", "fill", 0, 0xff, size, func(mem []byte) int { return bytes.IndexByte(mem, 0) }},
		{"copy down", "copy", 0, 1, size - 1, func(mem []byte) int {
			i := 0
			for mem[i] != at(i) {
				i++
			}
			return i
		}},
		// Up over itself: from the end down.
		{"copy up", "copy", 1, 0, size - 1, func(mem []byte) int {
			i := size - 1
			for mem[i] != at(i) {
				i--
			}
			return size - 1 - i
		}},
		{"init", "init", 0, 0, segLong, func(mem []byte) int {
			i := 0
			for mem[i] != at(i) {
				i++
			}
			return i
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mod, err := wz.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName(""))
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close(ctx)
			if tt.fn != "fill" {
				mem, _ := mod.Memory().Read(0, size)
				for i := range mem {
					mem[i] = at(i)
				}
			}
			mod.ExportedGlobal(CounterExport).(api.MutableGlobal).Set(api.EncodeI32(chunks*(1+BulkChunk>>BulkShift) + 1))
			_, err = mod.ExportedFunction(tt.fn).Call(ctx, api.EncodeU32(tt.a), api.EncodeU32(tt.b), api.EncodeU32(tt.n))
			if err == nil || !strings.Contains(err.Error(), "stopped") {
				t.Fatalf("got %v, want the tick's trap part way", err)
			}
			mem, _ := mod.Memory().Read(0, size)
			if got := tt.written(mem); got != chunks*BulkChunk {
				t.Errorf("%d bytes written before the tick stopped it, want %d", got, chunks*BulkChunk)
			}
		})
	}
}

// TestDeadlineBulkNames traps in a long fill, of a module with function
// names and of one without: the trap names the function the rewrite added
// for it, and the module's own names stay.
func TestDeadlineBulkNames(t *testing.T) {
	named := bulkModule(2)
	names := wasmbin.AppendName([]byte{1, 0}, "fill_it") // function 0, fill
	section := append(wasmbin.AppendName(nil, "name"), 1)
	section = append(wasmbin.AppendULEB(section, uint64(len(names))), names...)
	named = wasmbin.AppendSection(named, wasmbin.SectionCustom, section)
	ctx := context.Background()
	for name, module := range map[string][]byte{"names": named, "no names": bulkModule(2)} {
		t.Run(name, func(t *testing.T) {
			rewritten, err := Deadline(module)
			if err != nil {
				t.Fatal(err)
			}
			wz := wazero.NewRuntime(ctx)
			defer wz.Close(ctx)
			var stop atomic.Bool
			var ticks atomic.Int64
			tickHost(t, wz, &stop, &ticks)
			mod, err := wz.InstantiateWithConfig(ctx, rewritten, wazero.NewModuleConfig().WithName(""))
			if err != nil {
				t.Fatal(err)
			}
			_, err = mod.ExportedFunction("fill").Call(ctx, 0, 0, 1<<20)
			if err == nil || !strings.Contains(err.Error(), ".berm.memory.fill(i32,i32,i32)") {
				t.Errorf("the trap of a long fill out of bounds: %v, want it to name berm.memory.fill", err)
			}
			if want := ".fill_it("; name == "names" && !strings.Contains(err.Error(), want) {
				t.Errorf("the trap: %v, want the module's own name %s too", err, want)
			}
		})
	}
}
