package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/berm-dev/berm/internal/wasmbin"
	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
)

// leafCallsImage is a program whose tool spin never ends: a loop whose body
// is 480 calls of a leaf function, each 330 divisions by a mutable global
// (1, which no compiler can fold). The leaf calls nothing, has no loop and
// is under 1 KiB, so its entry is not counted; the loop's header weighs the
// loop's own bytes, one turn. A turn takes about a millisecond, so the
// Period turns between two ticks take seconds.
func leafCallsImage() []byte {
	const divisions, leafCalls = 330, 480
	b := []byte(wasmbin.Header)
	// (i64) -> i64, the leaf's; () -> (), the tool's.
	b = wasmbin.AppendSection(b, wasmbin.SectionType, []byte{2, 0x60, 1, 0x7e, 1, 0x7e, 0x60, 0, 0})
	b = wasmbin.AppendSection(b, wasmbin.SectionFunction, []byte{2, 0, 1})
	b = wasmbin.AppendSection(b, wasmbin.SectionMemory, []byte{1, 0, 1})
	b = wasmbin.AppendSection(b, wasmbin.SectionGlobal, []byte{1, 0x7e, 1, 0x42, 1, 0x0b}) // (mut i64) 1
	exports := append(wasmbin.AppendName([]byte{2}, "memory"), 2, 0)
	exports = append(wasmbin.AppendName(exports, "berm_tool_spin"), 0, 1)
	b = wasmbin.AppendSection(b, wasmbin.SectionExport, exports)
	leaf := []byte{0, 0x20, 0} // local.get 0
	for range divisions {
		leaf = append(leaf, 0x23, 0, 0x80) // global.get 0; i64.div_u
	}
	leaf = append(leaf, 0x0b)
	// (local i64) local.set 0 (i64.const -1); loop: local.get 0, the calls,
	// local.set 0; br 0.
	spin := []byte{1, 1, 0x7e, 0x42, 0x7f, 0x21, 0, 0x03, 0x40, 0x20, 0}
	for range leafCalls {
		spin = append(spin, 0x10, 0)
	}
	spin = append(spin, 0x21, 0, 0x0c, 0, 0x0b, 0x0b)
	code := []byte{2}
	for _, body := range [][]byte{leaf, spin} {
		code = append(wasmbin.AppendULEB(code, uint64(len(body))), body...)
	}
	b = wasmbin.AppendSection(b, wasmbin.SectionCode, code)
	return manifest.AppendSection(b, []byte(`{"abi_version":0,"tools":[{"name":"spin"}]}`))
}

// TestDeadlineAttackLeafCalls wants leafCallsImage's spin stopped at its
// deadline on both paths. The plain path stops it within milliseconds; the
// fast path ran 13 s past a deadline of 200 ms: its count weighs a loop by
// its bytes and not the calls in it, and the leaves count nothing. Since a
// compiled loop yields only at a tick, a collection's stop of the world
// waits as long, for every call of the runtime.
func TestDeadlineAttackLeafCalls(t *testing.T) {
	const deadline = 200 * time.Millisecond
	const slack = 3 * time.Second
	image := leafCallsImage()
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			rt := newRuntime(t, &runtime.Config{Plain: path.plain, Limits: runtime.Limits{Deadline: deadline}})
			if _, err := rt.Deploy(context.Background(), "leafcalls", image, nil); err != nil {
				t.Fatal(err)
			}
			wantStoppedAtDeadline(t, rt, "leafcalls", "spin", deadline, slack)
		})
	}
}
