package transform

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/berm-dev/berm/internal/wasmbin"
)

// TestAttackExits calls, from the host, functions that count in a local
// (each has a loop) and leave it in ways TestDeadlineLocalCounter does not
// try: with results, from blocks with parameters, from an else arm, by a
// br_table whose labels mix the loop's, a block's and the function's, after
// unreachable code, around call_indirect and recursion. Each must give the
// original's result, and its turns must reach the global: the instance
// stays, so the host's calls add up to ticks.
func TestAttackExits(t *testing.T) {
	const turns, calls = 4096, 64
	module, err := os.ReadFile(filepath.Join("testdata", "attack_exits.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wz := wazero.NewRuntime(ctx)
	defer wz.Close(ctx)
	original, err := wz.InstantiateWithConfig(ctx, module, wazero.NewModuleConfig().WithName("original"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"br_deep", "return_else", "br_table_mixed", "br_if_multi", "indirect", "recurse", "unreachable_br"} {
		t.Run(name, func(t *testing.T) {
			// An instance of its own: a fresh counter, at Period.
			mod, ticks := ticking(t, module)
			want, err := original.ExportedFunction(name).Call(ctx, turns)
			if err != nil {
				t.Fatal(err)
			}
			for range calls {
				got, err := mod.ExportedFunction(name).Call(ctx, turns)
				if err != nil {
					t.Fatal(err)
				}
				if got[0] != want[0] {
					t.Fatalf("got %d, want the original's %d", got[0], want[0])
				}
			}
			if got, least := ticks.Load(), int64(turns*calls/Period)-1; got < least {
				t.Errorf("%d ticks for %d turns, want %d or more", got, turns*calls, least)
			}
		})
	}
}

// TestAttackLocals gives a function that counts in a local many locals of
// its own, so that the counter's index (and the bulk length's, when the loop
// fills too) takes more LEB bytes, in several groups of several types: the
// rewrite must stay valid and count every turn.
func TestAttackLocals(t *testing.T) {
	const turns, calls = 4096, 16
	for _, locals := range []uint64{0, 126, 127, 128, 16382, 16383, 16384, 70000} {
		for _, bulk := range []bool{false, true} {
			// The locals: as many i32 as asked beside the parameter, then
			// an i64 and an f64 in groups of their own.
			body := wasmbin.AppendULEB([]byte{3}, locals)
			body = append(body, 0x7f, 1, 0x7e, 1, 0x7c)
			var inner []byte
			if bulk {
				inner = []byte{0x41, 0, 0x41, 0, 0x41, 16, 0xfc, 11, 0} // memory.fill 0 0 16
			}
			// The last i32 local, then the i64, are set every turn.
			last := wasmbin.AppendULEB([]byte{0x21}, locals)
			inner = append(append(inner, 0x20, 0), last...)
			inner = append(inner, 0x42, 1)
			inner = wasmbin.AppendULEB(append(inner, 0x21), locals+1)
			loop := loopOf(inner)
			body = append(body, loop[1:]...)
			t.Run(fmt.Sprintf("%d locals, bulk %v", locals, bulk), func(t *testing.T) {
				mod, ticks := ticking(t, testModule(testFunc{"run", true, body}))
				for range calls {
					if _, err := mod.ExportedFunction("run").Call(context.Background(), turns); err != nil {
						t.Fatal(err)
					}
				}
				if got, least := ticks.Load(), int64(turns*calls/Period)-1; got < least {
					t.Errorf("%d ticks, want %d or more", got, least)
				}
			})
		}
	}
}
