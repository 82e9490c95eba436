package runtime_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/berm-dev/berm/internal/wasmbin"
	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/host"
)

// paths are the two ways a runtime stops a call at its deadline: the fast
// one, the default (transform.Deadline's count, which ticks into the host),
// and the plain one (wazero's check at every loop header), tested against
// each other. Under BERM_PLAIN=1 both are plain.
var paths = []struct {
	name  string
	plain bool
}{{"fast", false}, {"plain", true}}

// kernelDigest is what the kernel's sha256 tool returns for mib passes: the
// same chain computed in Go.
func kernelDigest(mib int) string {
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*31 + 7)
	}
	var d [32]byte
	for range mib {
		d = sha256.Sum256(buf)
		copy(buf, d[:])
	}
	return hex.EncodeToString(d[:])
}

func deployFile(tb testing.TB, rt *runtime.Runtime, name, path string) {
	tb.Helper()
	image, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := rt.Deploy(context.Background(), name, image, nil); err != nil {
		tb.Fatalf("deploy %s: %v", path, err)
	}
}

// TestDeadlinePaths runs programs that never end, each its own way, on both
// paths, and wants each stopped at the deadline with little slack; and a
// compute kernel that ends, with the same result on both.
func TestDeadlinePaths(t *testing.T) {
	const deadline = 200 * time.Millisecond
	// Generous for a loaded CI machine, where a goroutine may wait that long
	// for a core: the fast path stops in about a millisecond (logged).
	const slack = time.Second
	tests := []struct {
		program, tool string
		fastOnly      bool
	}{
		{"kernel", "spin", false},
		{"stop", "loop", false},
		// wazero checks at loop headers only: recursion without a loop
		// runs on past the deadline on the plain path.
		{"stop", "recurse", true},
		{"stop", "nested", false},
		{"startloop", "never", false},
		{"nest", "call_spin", false}, // the callee spins: both instances stop
		{"core", "loop", false},
	}
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			rt := newRuntime(t, &runtime.Config{Plain: path.plain, Limits: runtime.Limits{Deadline: deadline}})
			deployFile(t, rt, "kernel", filepath.Join("testdata", "kernel", "kernel.wasm"))
			deployFile(t, rt, "stop", filepath.Join("internal", "transform", "testdata", "stop.wasm"))
			deployFile(t, rt, "startloop", filepath.Join("internal", "transform", "testdata", "startloop.wasm"))
			deployFile(t, rt, "ops", filepath.Join("internal", "transform", "testdata", "ops.wasm"))
			deploy(t, rt, "nest", "nest.wasm")
			deploy(t, rt, "core", "core.wasm")
			for _, tt := range tests {
				t.Run(tt.program+"."+tt.tool, func(t *testing.T) {
					if tt.fastOnly && (path.plain || os.Getenv("BERM_PLAIN") == "1") {
						t.Skip("the plain path does not stop it")
					}
					wantStoppedAtDeadline(t, rt, tt.program, tt.tool, deadline, slack)
				})
			}
			t.Run("canceled", func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(20*time.Millisecond, cancel)
				_, err := rt.Call(ctx, "kernel", "spin", []byte(`{}`))
				if !errors.Is(err, context.Canceled) {
					t.Errorf("got %v, want context.Canceled", err)
				}
			})
			t.Run("kernel", func(t *testing.T) {
				// The plain path takes over the short deadline for this.
				rt := newRuntime(t, &runtime.Config{Plain: path.plain})
				deployFile(t, rt, "kernel", filepath.Join("testdata", "kernel", "kernel.wasm"))
				out, err := rt.Call(context.Background(), "kernel", "sha256", []byte(`{"mib":3}`))
				if err != nil || string(out.Result) != kernelDigest(3) {
					t.Errorf("got %q, %v; want %s", out.Result, err, kernelDigest(3))
				}
			})
			t.Run("ops", func(t *testing.T) {
				if _, err := rt.Call(context.Background(), "ops", "ops", []byte(`{}`)); err != nil {
					t.Error(err)
				}
			})
		})
	}
}

// wantStoppedAtDeadline calls program's tool and wants it stopped by its
// deadline, no later than slack after it.
func wantStoppedAtDeadline(t *testing.T, rt *runtime.Runtime, program, tool string, deadline, slack time.Duration) {
	t.Helper()
	start := time.Now()
	_, err := rt.Call(context.Background(), program, tool, []byte(`{}`))
	took := time.Since(start)
	if !errors.Is(err, runtime.ErrDeadline) {
		t.Fatalf("got %v, want ErrDeadline", err)
	}
	if took > deadline+slack {
		t.Errorf("stopped %v after the deadline", took-deadline)
	}
	t.Logf("stopped %v after the deadline", took-deadline)
}

// TestDeadlineLetsGoRun spins a program on every core while the garbage
// collector stops the world: compiled code cannot be preempted, so it is the
// fast path's ticks, which yield, that let the collection through. The
// bound on the collection is the deadline's, not a speed: it shows that the
// collection did not need the calls to end, on a machine however loaded.
// The plain path has no such point (wazero's check at loop headers reads a
// flag without leaving compiled code): its collection may wait for the
// deadline, which CI saw (4.9 s of 5 s), so it is only checked to end.
func TestDeadlineLetsGoRun(t *testing.T) {
	const deadline = 5 * time.Second
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			rt := newRuntime(t, &runtime.Config{Plain: path.plain, Limits: runtime.Limits{Deadline: deadline}})
			deployFile(t, rt, "kernel", filepath.Join("testdata", "kernel", "kernel.wasm"))
			deployFile(t, rt, "stop", filepath.Join("internal", "transform", "testdata", "stop.wasm"))
			spinners := goruntime.GOMAXPROCS(0) + 1
			done := make(chan error, spinners)
			for i := range spinners {
				program, tool := "kernel", "spin"
				if i%2 == 1 {
					program, tool = "stop", "loop"
				}
				go func() {
					_, err := rt.Call(context.Background(), program, tool, []byte(`{}`))
					done <- err
				}()
			}
			time.Sleep(100 * time.Millisecond)
			start := time.Now()
			goruntime.GC()
			took := time.Since(start)
			t.Logf("a collection beside %d programs in loops took %v", spinners, took)
			fast := !path.plain && os.Getenv("BERM_PLAIN") != "1"
			if fast && took > deadline-time.Second {
				t.Errorf("a collection took %v beside programs in loops, near their deadline of %v", took, deadline)
			}
			for range spinners {
				if err := <-done; !errors.Is(err, runtime.ErrDeadline) {
					t.Errorf("got %v, want ErrDeadline", err)
				}
			}
		})
	}
}

// A module that names a global it does not have is invalid, and stays so on
// the fast path: the rewrite adds two globals (the stop flag and the
// counter), and a module that names them before they exist would otherwise
// become valid, hold its counter up and spin past every deadline.
func TestDeadlineRewriteValidatesFirst(t *testing.T) {
	b := []byte(wasmbin.Header)
	b = wasmbin.AppendSection(b, 1, []byte{1, 0x60, 0, 0}) // a type: () -> ()
	b = wasmbin.AppendSection(b, 3, []byte{1, 0})          // function 0 of it
	b = wasmbin.AppendSection(b, 5, []byte{1, 0, 1})       // a memory of one page
	exports := append(wasmbin.AppendName([]byte{2}, "memory"), 2, 0)
	exports = append(wasmbin.AppendName(exports, "berm_tool_spin"), 0, 0)
	b = wasmbin.AppendSection(b, 7, exports)
	// loop: global.set 1 (i32.const 1000); br 0; end; end: global 1 is the
	// rewrite's counter.
	body := []byte{0, 0x03, 0x40, 0x41, 0xe8, 0x07, 0x24, 0x01, 0x0c, 0x00, 0x0b, 0x0b}
	code := append(wasmbin.AppendULEB([]byte{1}, uint64(len(body))), body...)
	b = wasmbin.AppendSection(b, 10, code)
	image := manifest.AppendSection(b, []byte(`{"abi_version":0,"tools":[{"name":"spin"}]}`))
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			rt := newRuntime(t, &runtime.Config{Plain: path.plain, Limits: runtime.Limits{Deadline: 200 * time.Millisecond}})
			_, err := rt.Deploy(context.Background(), "invalid", image, nil)
			if !errors.Is(err, manifest.ErrInvalid) {
				t.Fatalf("deploy of a module naming a global it lacks: %v, want ErrInvalid", err)
			}
		})
	}
}

// TestDeadlineEscapes runs, on both paths, the work that no loop header
// counts, each kind in a loop of its own: bulk memory and table operations,
// a slow host syscall, nested calls that each run fewer turns than a tick's
// period, a WASI sleep of 10 s, WASI calls of much work each (random_get,
// fd_write). Each is stopped at the deadline; before the host checked at
// every syscall, WASI call and sleep, and the rewrite weighed bulk
// operations, each ran on for seconds to minutes.
func TestDeadlineEscapes(t *testing.T) {
	const deadline = 300 * time.Millisecond
	// Generous for a loaded CI machine; each stops within milliseconds
	// (logged), and each ran on 8 s or more without the checks.
	const slack = 5 * time.Second
	slow := runtime.Syscall{Name: "test.slow", Func: func(context.Context, *runtime.Call, [][]byte) (uint64, error) {
		time.Sleep(time.Millisecond)
		return 0, nil
	}}
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			rt := newRuntimeDepth(t, runtime.DefaultCallDepth, []runtime.Syscall{slow}, &runtime.Config{
				Plain:        path.plain,
				Limits:       runtime.Limits{Deadline: deadline},
				Imports:      []runtime.HostModule{host.WASI()},
				ModuleConfig: host.ModuleConfig(),
				// stdout into the log: write's newlines are lines to count.
				Log: func(context.Context, string, string, []byte) {},
			})
			deployLocal(t, rt, "escape", "escape.wasm")
			for _, tool := range []string{"fill", "copy", "tablefill", "slow", "callloop", "sleep", "random", "write"} {
				t.Run(tool, func(t *testing.T) {
					wantStoppedAtDeadline(t, rt, "escape", tool, deadline, slack)
				})
			}
			t.Run("busy", func(t *testing.T) {
				// The callee of callloop ends by itself.
				if _, err := rt.Call(context.Background(), "escape", "busy", []byte(`{}`)); err != nil {
					t.Error(err)
				}
			})
		})
	}
}

// A program cannot import the rewrite's tick, berm.deadline, itself: the
// manifest of the image it came as is read before any rewrite, and refuses
// every import from berm but berm.syscall.
func TestDeadlineTickNotImportable(t *testing.T) {
	b := []byte(wasmbin.Header)
	b = wasmbin.AppendSection(b, 1, []byte{1, 0x60, 0, 0}) // a type: () -> ()
	imports := wasmbin.AppendName(wasmbin.AppendName([]byte{1}, "berm"), "deadline")
	b = wasmbin.AppendSection(b, 2, append(imports, 0, 0)) // berm.deadline of it
	b = wasmbin.AppendSection(b, 5, []byte{1, 0, 1})       // a memory of one page
	exports := append(wasmbin.AppendName([]byte{2}, "memory"), 2, 0)
	exports = append(wasmbin.AppendName(exports, "berm_tool_tick"), 0, 0)
	b = wasmbin.AppendSection(b, 7, exports)
	image := manifest.AppendSection(b, []byte(`{"abi_version":0,"tools":[{"name":"tick"}]}`))
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			rt := newRuntime(t, &runtime.Config{Plain: path.plain})
			_, err := rt.Deploy(context.Background(), "tick", image, nil)
			if !errors.Is(err, manifest.ErrBermImport) {
				t.Fatalf("deploy of a module importing berm.deadline: %v, want ErrBermImport", err)
			}
		})
	}
}

// weighModule is a module of tools that loop on work a count of one turn per
// loop header would hardly see, each its own way, built here since their
// sources would be megabytes of WAT: fills of 4 KiB less a byte, 1000 to a
// turn of the loop (16 s past the deadline when they weighed nothing); a
// call of a leaf function of 20,000 loads and stores; a loop whose body is
// as long.
func weighModule() []byte {
	var straight []byte
	for i := range 20000 {
		a, b := byte(i*8%56), byte((i*24+8)%56)
		// i64.store (i32.const a) (i64.add (i64.load (i32.const b)) (i64.const 1))
		straight = append(straight, 0x41, a, 0x41, b, 0x29, 3, 0, 0x42, 1, 0x7c, 0x37, 3, 0)
	}
	var fills []byte
	for range 1000 {
		// memory.fill (i32.const 0x100) (i32.const 1) (i32.const 4095)
		fills = append(fills, 0x41, 0x80, 0x02, 0x41, 1, 0x41, 0xff, 0x1f, 0xfc, 11, 0)
	}
	loop := func(body []byte) []byte { // loop { body; br 0 } end
		b := append([]byte{0, 0x03, 0x40}, body...)
		return append(b, 0x0c, 0, 0x0b, 0x0b)
	}
	bodies := [][]byte{
		append(append([]byte{0}, straight...), 0x0b), // 0: the leaf
		loop(fills),
		loop([]byte{0x10, 0}),
		loop(straight),
	}
	b := []byte(wasmbin.Header)
	b = wasmbin.AppendSection(b, 1, []byte{1, 0x60, 0, 0}) // a type: () -> ()
	b = wasmbin.AppendSection(b, 3, []byte{4, 0, 0, 0, 0})
	b = wasmbin.AppendSection(b, 5, []byte{1, 0, 1}) // a memory of one page
	exports := append(wasmbin.AppendName([]byte{4}, "memory"), 2, 0)
	for i, name := range []string{"shortfills", "leaf", "longloop"} {
		exports = append(wasmbin.AppendName(exports, "berm_tool_"+name), 0, byte(i+1))
	}
	b = wasmbin.AppendSection(b, 7, exports)
	code := []byte{byte(len(bodies))}
	for _, body := range bodies {
		code = append(wasmbin.AppendULEB(code, uint64(len(body))), body...)
	}
	b = wasmbin.AppendSection(b, 10, code)
	return manifest.AppendSection(b, []byte(`{"abi_version":0,"tools":[{"name":"shortfills"},{"name":"leaf"},{"name":"longloop"}]}`))
}

// TestDeadlineWeighs runs weighModule's tools on both paths, and wants each
// stopped at the deadline: before the rewrite weighed what each count
// stands for, the fast path ran each on for seconds.
func TestDeadlineWeighs(t *testing.T) {
	const deadline = 300 * time.Millisecond
	// Generous for a loaded CI machine; each stops within milliseconds
	// (logged).
	const slack = 5 * time.Second // generous: these ran 16 to 21 s past it
	image := weighModule()
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			rt := newRuntime(t, &runtime.Config{Plain: path.plain, Limits: runtime.Limits{Deadline: deadline}})
			if _, err := rt.Deploy(context.Background(), "weigh", image, nil); err != nil {
				t.Fatal(err)
			}
			for _, tool := range []string{"shortfills", "leaf", "longloop"} {
				t.Run(tool, func(t *testing.T) {
					wantStoppedAtDeadline(t, rt, "weigh", tool, deadline, slack)
				})
			}
		})
	}
}

// TestCloseEndsCalls closes the runtime under calls that would run to their
// deadline, a minute away: a spin and a loop of WASI calls. Each ends soon
// after with ErrClosed. Before, the fast path ran them to the deadline, and
// the plain path returned success with an empty result (wazero ends a call
// closed with exit code 0, which read as proc_exit(0)).
func TestCloseEndsCalls(t *testing.T) {
	const deadline = time.Minute
	for _, path := range paths {
		for _, call := range []struct{ program, tool string }{{"kernel", "spin"}, {"escape", "random"}} {
			t.Run(path.name+"/"+call.tool, func(t *testing.T) {
				rt := newRuntimeDepth(t, runtime.DefaultCallDepth, []runtime.Syscall{{Name: "test.slow", Func: func(context.Context, *runtime.Call, [][]byte) (uint64, error) {
					return 0, nil
				}}}, &runtime.Config{
					Plain:        path.plain,
					Limits:       runtime.Limits{Deadline: deadline},
					Imports:      []runtime.HostModule{host.WASI()},
					ModuleConfig: host.ModuleConfig(),
				})
				deployFile(t, rt, "kernel", filepath.Join("testdata", "kernel", "kernel.wasm"))
				deployLocal(t, rt, "escape", "escape.wasm")
				done := make(chan error, 1)
				go func() {
					_, err := rt.Call(context.Background(), call.program, call.tool, []byte(`{}`))
					done <- err
				}()
				time.Sleep(100 * time.Millisecond)
				start := time.Now()
				if err := rt.Close(context.Background()); err != nil {
					t.Errorf("close: %v", err)
				}
				select {
				case err := <-done:
					if !errors.Is(err, runtime.ErrClosed) {
						t.Errorf("got %v, want ErrClosed", err)
					}
					t.Logf("ended %v after Close began", time.Since(start))
				case <-time.After(deadline / 2): // generous: it ends in milliseconds
					t.Fatal("the call runs on after Close")
				}
			})
		}
	}
}

// BenchmarkWASICalls weighs what the host's listener (listen.go) costs a
// call of many cheap WASI calls: 10,000 random_get of 8 bytes. Divide by
// 10,000 for a WASI call.
func BenchmarkWASICalls(b *testing.B) {
	for _, path := range paths {
		b.Run(path.name, func(b *testing.B) {
			rt := newRuntime(b, &runtime.Config{
				Plain:        path.plain,
				Imports:      []runtime.HostModule{host.WASI()},
				ModuleConfig: host.ModuleConfig(),
			})
			deployLocal(b, rt, "escape", "escape.wasm")
			for b.Loop() {
				if _, err := rt.Call(context.Background(), "escape", "randoms", []byte(`{}`)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// leafAttack is a program whose tool spin never ends: a loop whose body is
// 480 calls of a leaf function of no loop and under 1 KiB of code, the
// instructions op n times between prefix and suffix. Its memory is a page.
func leafAttack(prefix, op, suffix []byte, n int) []byte {
	b := []byte(wasmbin.Header)
	b = wasmbin.AppendSection(b, wasmbin.SectionType, []byte{1, 0x60, 0, 0}) // () -> ()
	b = wasmbin.AppendSection(b, wasmbin.SectionFunction, []byte{2, 0, 0})
	b = wasmbin.AppendSection(b, wasmbin.SectionMemory, []byte{1, 0, 1})
	exports := append(wasmbin.AppendName([]byte{2}, "memory"), 2, 0)
	exports = append(wasmbin.AppendName(exports, "berm_tool_spin"), 0, 1)
	b = wasmbin.AppendSection(b, wasmbin.SectionExport, exports)
	leaf := append([]byte{0}, prefix...)
	for range n {
		leaf = append(leaf, op...)
	}
	leaf = append(append(leaf, suffix...), 0x0b)
	spin := []byte{0, 0x03, 0x40} // loop: the calls; br 0
	for range 480 {
		spin = append(spin, 0x10, 0)
	}
	spin = append(spin, 0x0c, 0, 0x0b, 0x0b)
	code := []byte{2}
	for _, body := range [][]byte{leaf, spin} {
		code = append(wasmbin.AppendULEB(code, uint64(len(body))), body...)
	}
	b = wasmbin.AppendSection(b, wasmbin.SectionCode, code)
	return manifest.AppendSection(b, []byte(`{"abi_version":0,"tools":[{"name":"spin"}]}`))
}

// TestDeadlineSlack runs, on both paths with a deadline of 100 ms, the work
// of the longest turns there are, and wants each stopped no later than the
// slack after it: bulk operations over all of a fresh memory (1 GiB, whose
// first writes cost the kernel 2 to 8 s), and loops of calls of small leaves
// of slow instructions: divisions (leafCallsImage), square roots,
// memory.grow and ref.func, which leave compiled code for wazero's Go.
// Before the rewrite cut long bulk operations and weighed such
// instructions, the fast path ran each of them on for 0.3 s to seconds.
//
// The plain path's check, at loop headers and function entries, stops all
// but the bulk operations, each one instruction, which wazero runs to their
// end: 128 MiB of fresh memory, as --memory allows by default, runs 0.1 to
// 0.3 s past the deadline, 1 GiB seconds.
//
// Stores and loads in each page of a fresh memory (touch, read) are stopped
// at a tick too, but what bounds them on the fast path is the kernel's
// faults of the pages a tick's period writes or reads, which no count sees:
// up to 64 MiB of them, 0.2 to 0.5 s on a loaded machine, hence their
// slack. Weighing a store as a fault would tick a compute kernel 3.7 times
// as often, 12 to 20% slower with the tick as it is.
func TestDeadlineSlack(t *testing.T) {
	const deadline = 100 * time.Millisecond
	// Generous for a loaded CI machine, where a goroutine may wait that long
	// for a core: the fast path stops each within some 10 ms (logged).
	const slack = time.Second
	one := []byte{0x44, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f} // f64.const 1
	leaves := map[string][]byte{
		"leafcalls": leafCallsImage(),
		// f64.sqrt of f64.sqrt of 1..., stored: 23 ns each.
		"sqrt": leafAttack(append([]byte{0x41, 0}, one...), []byte{0x9f}, []byte{0x39, 3, 0}, 1000),
		// memory.grow (i32.const 0), dropped: 60 ns each.
		"grow": leafAttack(nil, []byte{0x41, 0, 0x40, 0, 0x1a}, nil, 200),
		// ref.func of spin (which its export declares), dropped: 435 ns
		// each.
		"reffunc": leafAttack(nil, []byte{0xd2, 1, 0x1a}, nil, 300),
	}
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			plain := path.plain || os.Getenv("BERM_PLAIN") == "1"
			rt := newRuntime(t, &runtime.Config{Plain: path.plain, Limits: runtime.Limits{Deadline: deadline}})
			deployLocal(t, rt, "fresh", "deadline_fresh.wasm")
			for name, image := range leaves {
				if _, err := rt.Deploy(context.Background(), name, image, nil); err != nil {
					t.Fatalf("deploy %s: %v", name, err)
				}
			}
			if !plain {
				// The plain path's memory is wazero's, on Go's heap: 1 GiB
				// of it would keep the collector busy for the tests after,
				// and its stops of the world wait on spinning programs that
				// never yield (TestDeadlineLetsGoRun).
				big := newRuntime(t, &runtime.Config{Limits: runtime.Limits{Deadline: deadline, Memory: 1 << 30}})
				deployLocal(t, big, "fresh", "deadline_fresh.wasm")
				for _, tool := range []string{"fill", "copy", "copydown"} {
					t.Run("fresh."+tool, func(t *testing.T) {
						wantStoppedAtDeadline(t, big, "fresh", tool, deadline, slack)
					})
				}
			}
			for _, tool := range []string{"touch", "read"} {
				t.Run("fresh."+tool, func(t *testing.T) {
					wantStoppedAtDeadline(t, rt, "fresh", tool, deadline, 5*time.Second)
				})
			}
			for _, program := range []string{"leafcalls", "sqrt", "grow", "reffunc"} {
				t.Run(program+".spin", func(t *testing.T) {
					wantStoppedAtDeadline(t, rt, program, "spin", deadline, slack)
				})
			}
		})
	}
}
