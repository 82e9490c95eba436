package runtime_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berm-dev/berm/internal/wasmbin"
	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
)

// What an instance is made of beside its memory is bounded at deploy and
// counted at every call: a 4 MB image of one passive element segment of 4
// million function references made every call of a no-op tool take seconds
// and hundreds of MB, and 500,000 mutable globals (2.5 MB) did as much.
// The images are testdata/instantiate_base.wasm with sections spliced in,
// made here rather than committed: the largest are megabytes.

var instantiateBase = sync.OnceValues(func() ([]byte, error) {
	return os.ReadFile(filepath.Join("testdata", "instantiate_base.wasm"))
})

// splice returns instantiate_base with the given sections (by id) added or
// in place of its own, in the order the binary format requires, its custom
// sections (the manifest) last.
func splice(tb testing.TB, sections map[byte][]byte) []byte {
	tb.Helper()
	base, err := instantiateBase()
	if err != nil {
		tb.Fatal(err)
	}
	own := map[byte][]byte{}
	var custom []byte
	for s, err := range wasmbin.Sections(base) {
		if err != nil {
			tb.Fatal(err)
		}
		if s.ID == wasmbin.SectionCustom {
			custom = append(custom, base[s.Start:s.End]...)
			continue
		}
		own[s.ID] = s.Payload
	}
	for id, p := range sections {
		own[id] = p
	}
	out := []byte(wasmbin.Header)
	for _, id := range []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 10, 11} {
		if p, ok := own[id]; ok {
			out = wasmbin.AppendSection(out, id, p)
		}
	}
	return append(out, custom...)
}

// vec is a vector of n copies of item.
func vec(n int, item ...byte) []byte {
	out := wasmbin.AppendULEB(nil, uint64(n))
	for range n {
		out = append(out, item...)
	}
	return out
}

// The sections of each kind, n of what each counts.
func mutableGlobals(n int) map[byte][]byte {
	return map[byte][]byte{wasmbin.SectionGlobal: vec(n, 0x7f, 0x01, 0x41, 0x00, 0x0b)} // (mut i32) (i32.const 0)
}

func passiveEntries(n int) map[byte][]byte {
	// One passive segment of n references to function 1, as in the attack.
	return map[byte][]byte{wasmbin.SectionElement: append([]byte{0x01, 0x01, 0x00}, vec(n, 0x01)...)}
}

func emptySegments(n int) map[byte][]byte {
	return map[byte][]byte{wasmbin.SectionElement: vec(n, 0x01, 0x00, 0x00)}
}

func tables(n int) map[byte][]byte {
	return map[byte][]byte{wasmbin.SectionTable: vec(n, 0x70, 0x00, 0x00)}
}

// mergedData is n active one-byte segments at offset 0, which berm merges
// into one.
func mergedData(n int) map[byte][]byte {
	return map[byte][]byte{wasmbin.SectionData: vec(n, 0x00, 0x41, 0x00, 0x0b, 0x01, 'x')}
}

// apartData is n empty passive segments and a data count section, which
// keep them apart: each reaches every instance.
func apartData(n int) map[byte][]byte {
	return map[byte][]byte{
		wasmbin.SectionDataCount: wasmbin.AppendULEB(nil, uint64(n)),
		wasmbin.SectionData:      vec(n, 0x01, 0x00),
	}
}

// functions is the base's two functions and n empty ones more.
func functions(tb testing.TB, n int) map[byte][]byte {
	code := wasmbin.AppendULEB(nil, uint64(2+n))
	for s, err := range wasmbin.Sections(splice(tb, nil)) {
		if err == nil && s.ID == wasmbin.SectionCode {
			code = append(code, s.Payload[1:]...) // past its count, 2
		}
	}
	for range n {
		code = append(code, 0x02, 0x00, 0x0b)
	}
	return map[byte][]byte{wasmbin.SectionFunction: vec(2+n, 0x01), wasmbin.SectionCode: code}
}

// imports is berm.syscall and n functions more from a module no host
// provides, the tools' exports moved past them.
func imports(n int) map[byte][]byte {
	name := func(b []byte, s string) []byte { return append(wasmbin.AppendULEB(b, uint64(len(s))), s...) }
	imp := wasmbin.AppendULEB(nil, uint64(1+n))
	imp = append(name(name(imp, "berm"), "syscall"), 0x00, 0x00)
	for i := range n {
		imp = append(name(name(imp, "x"), fmt.Sprint(i)), 0x00, 0x01)
	}
	exp := []byte{0x03}
	exp = append(name(exp, "memory"), 0x02, 0x00)
	exp = wasmbin.AppendULEB(append(name(exp, "berm_tool_ran"), 0x00), uint64(1+n))
	exp = wasmbin.AppendULEB(append(name(exp, "berm_tool_trap"), 0x00), uint64(2+n))
	return map[byte][]byte{wasmbin.SectionImport: imp, wasmbin.SectionExport: exp}
}

func TestInstantiateBounds(t *testing.T) {
	ctx := context.Background()
	rt := newRuntime(t, nil)
	limit := func(n int) string { return fmt.Sprintf("over the limit of %d", n) }
	tests := []struct {
		name     string
		sections map[byte][]byte
		words    []string // of the refusal; none when it deploys
	}{
		// The attacks.
		{"4 million element entries", passiveEntries(4_000_000),
			[]string{"element segments: 4000000 entries in one segment", limit(runtime.DefaultMaxElements)}},
		{"500,000 mutable globals", mutableGlobals(500_000),
			[]string{"globals: the module defines 500000", limit(runtime.DefaultMaxGlobals)}},

		// Each bound, and one past it.
		{"element entries at the bound", passiveEntries(runtime.DefaultMaxElements - 1), nil},
		{"element entries past it", passiveEntries(runtime.DefaultMaxElements),
			[]string{"element segments", limit(runtime.DefaultMaxElements)}},
		{"empty element segments past it", emptySegments(runtime.DefaultMaxElements + 1),
			[]string{"0 entries in 65537 segments", limit(runtime.DefaultMaxElements)}},
		{"globals at the bound", mutableGlobals(runtime.DefaultMaxGlobals), nil},
		{"globals past it", mutableGlobals(runtime.DefaultMaxGlobals + 1),
			[]string{"globals: the module defines 16385", limit(runtime.DefaultMaxGlobals)}},
		{"tables at the bound", tables(runtime.DefaultMaxTables), nil},
		{"tables past it", tables(runtime.DefaultMaxTables + 1),
			[]string{"tables: the module defines 1025", limit(runtime.DefaultMaxTables)}},
		{"data segments at the bound, merged", mergedData(runtime.DefaultMaxDataSegments), nil},
		{"data segments past it", mergedData(runtime.DefaultMaxDataSegments + 1),
			[]string{"data segments: the module has 1048577", limit(runtime.DefaultMaxDataSegments)}},
		{"data segments apart at the bound", apartData(runtime.DefaultMaxApartData), nil},
		{"data segments apart past it", apartData(runtime.DefaultMaxApartData + 1),
			[]string{"data segments: 65537 left apart", "a data count section", limit(runtime.DefaultMaxApartData)}},
		{"imports at the bound", imports(runtime.DefaultMaxImports - 1), nil},
		{"imports past it", imports(runtime.DefaultMaxImports),
			[]string{"imports: the module imports 1025 functions", limit(runtime.DefaultMaxImports)}},
		{"functions past the bound", functions(t, runtime.DefaultMaxFunctions-1),
			[]string{"functions: the module defines 262145", limit(runtime.DefaultMaxFunctions)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			image := splice(t, tt.sections)
			p, err := rt.Deploy(ctx, "p", image, nil)
			if tt.words != nil {
				check(t, runtime.Outcome{}, err, want{err: runtime.ErrRefused, words: tt.words})
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			out, err := rt.Call(ctx, "p", "ran", []byte(`{}`))
			check(t, out, err, want{result: "ran"})
			rt.Remove(p.Name)
		})
	}

	// At the bound on functions, which costs compiling alone: Check, which
	// deploy runs first, lets it through.
	m, err := manifest.Read(splice(t, functions(t, runtime.DefaultMaxFunctions-2)))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Check("p", m); err != nil {
		t.Fatalf("functions at the bound: %v", err)
	}
}

// An instance holds what wazero builds for it beside its memory, and a call
// takes that of Limits.TotalMemory too: 20,000 element entries (about 1.9
// MB an instance) under a total of 1 MiB are refused as the host's, before
// anything runs, where they used to run uncounted.
func TestInstantiateBudget(t *testing.T) {
	ctx := context.Background()
	image := splice(t, passiveEntries(20_000))
	small := newRuntime(t, &runtime.Config{Limits: runtime.Limits{TotalMemory: 1 << 20}})
	if _, err := small.Deploy(ctx, "p", image, nil); err != nil {
		t.Fatal(err)
	}
	out, err := small.Call(ctx, "p", "ran", []byte(`{}`))
	check(t, out, err, want{err: runtime.ErrHost, words: []string{"KiB (its memory and what wazero builds for it), more than is left of the limit of 1024 KiB on all instances together"}})

	// Under a total that takes it, the call runs, and gives it all back.
	fits := newRuntime(t, &runtime.Config{Limits: runtime.Limits{TotalMemory: 4 << 20}})
	p, err := fits.Deploy(ctx, "p", image, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"ran", "trap", "ran"} {
		out, err := fits.Call(ctx, "p", tool, []byte(`{}`))
		if tool == "ran" {
			check(t, out, err, want{result: "ran"})
		}
		if used := runtime.Budget(fits); used != 0 {
			t.Fatalf("after %s: %d bytes of the budget still taken, want 0", tool, used)
		}
	}
	// Its instances are not kept idle, where what they hold would count
	// against nothing; the base program's are.
	if _, pooled := runtime.Reused(p); pooled {
		t.Errorf("instances holding %d element entries are pooled", 20_000)
	}
	base, err := fits.Deploy(ctx, "base", splice(t, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		out, err := fits.Call(ctx, "base", "ran", []byte(`{}`))
		check(t, out, err, want{result: "ran"})
		if used := runtime.Budget(fits); used != 0 {
			t.Fatalf("after base.ran: %d bytes of the budget still taken, want 0", used)
		}
	}
	if n, _ := runtime.Reused(base); !plainEnv && n != 1 {
		t.Errorf("the base program's second call reused %d instances, want 1", n)
	}
}

// Instantiation counts against the call's deadline: a call whose deadline
// passes before its instance is made, or while wazero makes it (60,000
// element entries take milliseconds, the deadline 200 µs), ends at the
// deadline with no instance ready to run the tool (Observer.Instantiate
// hears of none). It used to get one, and run the tool past the deadline.
func TestInstantiateDeadline(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name     string
		deadline time.Duration
		sections map[byte][]byte
	}{
		{"passed before", time.Nanosecond, nil},
		{"passed during", 200 * time.Microsecond, passiveEntries(60_000)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var ready atomic.Int64
			rt := newRuntime(t, &runtime.Config{
				Limits:   runtime.Limits{Deadline: tt.deadline},
				Observer: runtime.Observer{Instantiate: func(string, time.Duration) { ready.Add(1) }},
			})
			if _, err := rt.Deploy(ctx, "p", splice(t, tt.sections), nil); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				out, err := rt.Call(ctx, "p", "trap", []byte(`{}`))
				check(t, out, err, want{err: runtime.ErrDeadline, words: []string{"ran past " + tt.deadline.String()}})
			}
			if n := ready.Load(); n != 0 {
				t.Fatalf("%d instances made ready to run the tool past the deadline, want 0", n)
			}
		})
	}
}
