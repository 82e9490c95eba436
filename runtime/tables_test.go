package runtime

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/berm-dev/berm/internal/wasmbin"
)

// TestTableGrowBounded runs table.grow through the runtime on a table
// declared without a maximum: past 2^20 entries it returns -1, as
// memory.grow does past the memory limit, instead of taking gigabytes.
func TestTableGrowBounded(t *testing.T) {
	ctx := context.Background()
	rt, err := New(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	image, err := os.ReadFile(filepath.Join("testdata", "tablegrow.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Deploy(ctx, "tablegrow", image, nil); err != nil {
		t.Fatal(err)
	}
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	out, err := rt.Call(ctx, "tablegrow", "grow", []byte(`{}`))
	goruntime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	// 250,000,000 entries refused; growth up to the bound still works.
	if want := "grow=-1 full=1 past=-1 size=1048576"; out.Failed || string(out.Result) != want {
		t.Fatalf("outcome %+v (result %q), want %q", out, out.Result, want)
	}
	// The 8 MiB of the 2^20 entries, a copy or two: nothing like the 2 GB
	// of the refused growth.
	if n := after.TotalAlloc - before.TotalAlloc; n > 256<<20 {
		t.Errorf("the call allocated %d MiB", n>>20)
	}
}

// tableSection is the payload of module's table section, nil without one.
func tableSection(t *testing.T, module []byte) []byte {
	t.Helper()
	for s, err := range wasmbin.Sections(module) {
		if err != nil {
			t.Fatal(err)
		}
		if s.ID == wasmbin.SectionTable {
			return s.Payload
		}
	}
	return nil
}

func leb(v uint64) []byte { return wasmbin.AppendULEB(nil, v) }

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// TestBoundTablesHello bounds the table of Go's linker, which it declares
// without a maximum: the rest of the module is kept byte for byte, and the
// program still compiles, starts and answers.
func TestBoundTablesHello(t *testing.T) {
	original := helloImage(t)
	bounded := boundTables(original, DefaultMaxTableEntries)
	// One funcref table, its minimum and no maximum: the minimum stays.
	unbounded := tableSection(t, original)
	if !bytes.HasPrefix(unbounded, []byte{1, 0x70, 0x00}) {
		t.Fatalf("table section % x: Go's linker declares one table without a maximum", unbounded)
	}
	if got, want := tableSection(t, bounded), cat([]byte{1, 0x70, 0x01}, unbounded[3:], leb(DefaultMaxTableEntries)); !bytes.Equal(got, want) {
		t.Fatalf("table section % x, want % x", got, want)
	}
	a, _ := sectionsBut(original, wasmbin.SectionTable)
	b, _ := sectionsBut(bounded, wasmbin.SectionTable)
	if len(a) != len(b) {
		t.Fatalf("sections: %d before, %d after", len(a), len(b))
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("section %d (id %d) changed", i, a[i][0])
		}
	}

	// Through the runtime, which compiles it bounded (and coalesced).
	ctx := context.Background()
	wasi := HostModule{Name: wasi_snapshot_preview1.ModuleName, Export: func(b wazero.HostModuleBuilder) {
		wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
	}}
	rt, err := New(ctx, Config{Imports: []HostModule{wasi}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	if _, err := rt.Deploy(ctx, "hello", original, nil); err != nil {
		t.Fatal(err)
	}
	out, err := rt.Call(ctx, "hello", "greet", []byte(`{"name":"x"}`))
	if err != nil || out.Failed || string(out.Result) != "Hello, x!" {
		t.Fatalf("greet: %+v (result %q), %v", out, out.Result, err)
	}
}

// tablesModule is a module of a table section alone.
func tablesModule(payload []byte) []byte {
	return wasmbin.AppendSection([]byte(wasmbin.Header), wasmbin.SectionTable, payload)
}

func TestBoundTables(t *testing.T) {
	const bound = DefaultMaxTableEntries
	refNullFunc := []byte{0xd0, 0x70, 0x0b}
	tests := []struct {
		name     string
		in, want []byte // table sections; want nil: the module is left as it is
	}{
		{"funcref without a maximum", []byte{1, 0x70, 0x00, 1}, cat([]byte{1, 0x70, 0x01, 1}, leb(bound))},
		{"a padded minimum, kept", []byte{1, 0x70, 0x00, 0x81, 0x80, 0}, cat([]byte{1, 0x70, 0x01, 0x81, 0x80, 0}, leb(bound))},
		{"a minimum over the bound", cat([]byte{1, 0x70, 0x00}, leb(bound+5)), cat([]byte{1, 0x70, 0x01}, leb(bound+5), leb(bound+5))},
		{"with a maximum", cat([]byte{1, 0x6f, 0x01, 0}, leb(1<<30)), nil},
		{"no table", []byte{0}, nil},
		{"beside one with a maximum, the rest of the bound",
			cat([]byte{2, 0x6f, 0x01, 0}, leb(1000), []byte{0x70, 0x00, 10}),
			cat([]byte{2, 0x6f, 0x01, 0}, leb(1000), []byte{0x70, 0x01, 10}, leb(bound-1000))},
		{"two without, halves",
			[]byte{2, 0x70, 0x00, 10, 0x6f, 0x00, 20},
			cat([]byte{2, 0x70, 0x01, 10}, leb(10+(bound-30)/2), []byte{0x6f, 0x01, 20}, leb(20+(bound-30)/2))},
		{"(ref null func)", []byte{1, 0x63, 0x70, 0x00, 1}, cat([]byte{1, 0x63, 0x70, 0x01, 1}, leb(bound))},
		{"an initializer",
			cat([]byte{1, 0x40, 0x00, 0x63, 0x70, 0x00, 2}, refNullFunc),
			cat([]byte{1, 0x40, 0x00, 0x63, 0x70, 0x01, 2}, leb(bound), refNullFunc)},

		// What wazero 1.12 refuses, or this does not read, is left to it.
		{"64-bit limits", []byte{1, 0x70, 0x04, 1}, nil},
		{"shared limits", []byte{1, 0x70, 0x02, 1}, nil},
		{"unknown limits", []byte{1, 0x70, 0x08, 1}, nil},
		{"an unknown instruction in an initializer", []byte{1, 0x40, 0x00, 0x70, 0x00, 1, 0xfb, 0x0b}, nil},
		{"a reserved byte", cat([]byte{1, 0x40, 0x01, 0x70, 0x00, 2}, refNullFunc), nil},
		{"truncated", []byte{1, 0x70, 0x00}, nil},
		{"bytes left over", []byte{1, 0x70, 0x00, 1, 0}, nil},
		{"too many tables", []byte{2, 0x70, 0x00, 1}, nil},
		{"an endless heap type", []byte{1, 0x63, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00, 1}, nil},
	}
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tablesModule(tt.in)
			out := boundTables(in, bound)
			if tt.want == nil {
				if &out[0] != &in[0] || len(out) != len(in) {
					t.Fatalf("rewritten: % x", out)
				}
				return
			}
			if !bytes.Equal(out, tablesModule(tt.want)) {
				t.Fatalf("table section % x, want % x", tableSection(t, out), tt.want)
			}
			if _, err := r.CompileModule(ctx, in); err != nil {
				t.Fatalf("the input does not compile: %v", err)
			}
			if _, err := r.CompileModule(ctx, out); err != nil {
				t.Fatalf("the output does not compile: %v", err)
			}
		})
	}

	// Two table sections, which wazero refuses.
	in := cat(tablesModule([]byte{1, 0x70, 0x00, 1}), wasmbin.AppendSection(nil, wasmbin.SectionTable, []byte{1, 0x70, 0x00, 1}))
	if out := boundTables(in, bound); &out[0] != &in[0] {
		t.Fatalf("two table sections: rewritten % x", out)
	}
}

// FuzzBoundTables holds boundTables to its promise on any bytes: no panic
// (rewriteTables is called without boundTables' recover), the input left
// unmodified, and a rewrite only of a table section that every table of has
// a maximum after, which wazero compiles when it compiled the input.
func FuzzBoundTables(f *testing.F) {
	for _, pattern := range []string{"../testdata/*.wasm", "../testdata/broken/*.wasm", "testdata/*.wasm", "../examples/hello/hello.wasm"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add(tablesModule([]byte{2, 0x70, 0x00, 10, 0x40, 0x00, 0x63, 0x70, 0x00, 2, 0xd0, 0x70, 0x0b}))
	ctx := context.Background()
	// The interpreter decodes and validates as the compiler does, faster.
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	f.Fuzz(func(t *testing.T, in []byte) {
		original := bytes.Clone(in)
		out, ok := rewriteTables(in, DefaultMaxTableEntries)
		if !bytes.Equal(in, original) {
			t.Fatal("input modified")
		}
		if !ok {
			return
		}
		tables, ok := parseTables(tableSection(t, out))
		if !ok {
			t.Fatalf("the rewritten table section does not read back: % x", tableSection(t, out))
		}
		for i, tt := range tables {
			if !tt.hasMax {
				t.Fatalf("table %d: no maximum", i)
			}
		}
		a, _ := sectionsBut(in, wasmbin.SectionTable)
		b, _ := sectionsBut(out, wasmbin.SectionTable)
		if len(a) != len(b) {
			t.Fatalf("sections: %d before, %d after", len(a), len(b))
		}
		for i := range a {
			if !bytes.Equal(a[i], b[i]) {
				t.Fatalf("section %d (id %d) changed", i, a[i][0])
			}
		}
		if _, err := r.CompileModule(ctx, in); err == nil {
			if _, err := r.CompileModule(ctx, out); err != nil {
				t.Fatalf("the input compiles, the output does not: %v", err)
			}
		}
	})
}
