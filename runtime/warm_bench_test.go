package runtime_test

// The benchmarks of issue 11 ("calls that start warm"), each run on the
// default (fast) path and on Config.Plain side by side, with wazero alone as
// the reference where there is one. testdata/bench/warm.sh runs them and
// prints the table of targets; each is also meaningful alone:
//
//	go test -run '^$' -bench Warm -benchmem ./runtime
//
// The runtimes here are made with runtime.New directly, not newRuntime, so
// that BERM_PLAIN in the environment cannot turn a "fast" column plain.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/host"
)

// warmPaths are the runtime's two ways of running a call: the default, with
// every fast path, and Config.Plain, the reference they are tested against.
var warmPaths = []struct {
	name  string
	plain bool
}{{"fast", false}, {"plain", true}}

func warmRuntime(b *testing.B, plain bool, syscalls []runtime.Syscall, opts runtime.Config) *runtime.Runtime {
	b.Helper()
	ctx := context.Background()
	opts.Plain, opts.Syscalls = plain, syscalls
	rt, err := runtime.New(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close(ctx) })
	return rt
}

// BenchmarkWarmEcho is one call of the tiny echo: through the runtime on
// each path, and with wazero alone (instantiate, call, close). Target: the
// fast path at most a third of bare.
func BenchmarkWarmEcho(b *testing.B) {
	for _, path := range warmPaths {
		b.Run(path.name, func(b *testing.B) {
			rt := warmRuntime(b, path.plain, nil, runtime.Config{})
			deploy(b, rt, "echo", "echo.wasm")
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				out, err := rt.Call(ctx, "echo", "echo", benchArgs)
				if err != nil || string(out.Result) != string(benchArgs) {
					b.Fatalf("%q, %v", out.Result, err)
				}
			}
		})
	}
	b.Run("bare", benchBareEcho)
}

// BenchmarkWarmGo is one call of the Go-built example's greet tool (3.4 MB,
// _initialize), calls back to back. Target: the fast path 10× faster than
// plain.
func BenchmarkWarmGo(b *testing.B) { benchGo(b, 0) }

// BenchmarkWarmGoIdle is BenchmarkWarmGo with the process idle for 500 µs
// between calls (not timed), as a server is between requests: the CPU's
// caches are then cold for the guest's code and memory, which costs a Go
// call about twice what back-to-back calls show. The figure behind the
// tools/call p50.
func BenchmarkWarmGoIdle(b *testing.B) { benchGo(b, 500*time.Microsecond) }

func benchGo(b *testing.B, idle time.Duration) {
	image, err := os.ReadFile(filepath.Join("..", "examples", "hello", "hello.wasm"))
	if err != nil {
		b.Fatal(err)
	}
	for _, path := range warmPaths {
		b.Run(path.name, func(b *testing.B) {
			ctx := context.Background()
			rt := warmRuntime(b, path.plain, host.Syscalls(memoryKV{}), runtime.Config{
				Imports:      []runtime.HostModule{host.WASI()},
				ModuleConfig: host.ModuleConfig(),
			})
			if _, err := rt.Deploy(ctx, "hello", image, nil); err != nil {
				b.Fatal(err)
			}
			if idle == 0 {
				// Else StopTimer and StartTimer would stop the world to read
				// the memory statistics at every pause.
				b.ReportAllocs()
			}
			for b.Loop() {
				if idle > 0 {
					b.StopTimer()
					time.Sleep(idle)
					b.StartTimer()
				}
				out, err := rt.Call(ctx, "hello", "greet", []byte(`{"name":"bench"}`))
				if err != nil || string(out.Result) != "Hello, bench!" {
					b.Fatalf("%q, %v", out.Result, err)
				}
			}
		})
	}
}

// BenchmarkWarmKernel is one call of the SHA-256 kernel over 16 MiB: through
// the runtime, its deadline on, on each path; and with wazero alone and no
// deadline at all (no WithCloseOnContextDone), what compiled code does
// unchecked. Target: the fast path within 1.1× of nodeadline.
func BenchmarkWarmKernel(b *testing.B) {
	const mib = 16
	args := []byte(`{"mib":` + strconv.Itoa(mib) + `}`)
	want := kernelDigest(mib)
	kernel := filepath.Join("testdata", "kernel", "kernel.wasm")
	ctx := context.Background()
	for _, path := range warmPaths {
		b.Run(path.name, func(b *testing.B) {
			rt := warmRuntime(b, path.plain, nil, runtime.Config{})
			deployFile(b, rt, "kernel", kernel)
			for b.Loop() {
				out, err := rt.Call(ctx, "kernel", "sha256", args)
				if err != nil || string(out.Result) != want {
					b.Fatalf("%q, %v", out.Result, err)
				}
			}
		})
	}
	b.Run("nodeadline", func(b *testing.B) {
		image, err := os.ReadFile(kernel)
		if err != nil {
			b.Fatal(err)
		}
		r := wazero.NewRuntime(ctx)
		defer r.Close(ctx)
		compiled := bareModule(b, r, image, func() []byte { return args })
		var result []byte
		ctx := context.WithValue(ctx, bareResultKey{}, &result)
		for b.Loop() {
			m, err := r.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName(""))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := m.ExportedFunction("berm_tool_sha256").Call(ctx); err != nil {
				b.Fatal(err)
			}
			m.Close(ctx)
			if string(result) != want {
				b.Fatalf("%q", result)
			}
		}
	})
}

// BenchmarkWarmParallel is the tiny echo called from every core at once, as
// a server's concurrent calls are. Target: 100,000 calls/s on the fast path.
func BenchmarkWarmParallel(b *testing.B) {
	for _, path := range warmPaths {
		b.Run(path.name, func(b *testing.B) {
			rt := warmRuntime(b, path.plain, nil, runtime.Config{})
			deploy(b, rt, "echo", "echo.wasm")
			ctx := context.Background()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					out, err := rt.Call(ctx, "echo", "echo", benchArgs)
					if err != nil || string(out.Result) != string(benchArgs) {
						b.Errorf("%q, %v", out.Result, err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}

// BenchmarkWarmInFlight holds 1,000 calls of an echo in flight at once, each
// blocked in a host syscall (test.hold, runtime/testdata/hold.wat), and
// reports the process's resident memory while they are: VmRSS then, VmHWM
// (the peak so far, so run one path per process for it to be that path's),
// and what each held call adds to the RSS before them. Target: at most
// 300 MB. Run it with -benchtime 1x: one iteration is the whole measure.
func BenchmarkWarmInFlight(b *testing.B) {
	const inFlight = 1000
	for _, path := range warmPaths {
		b.Run(path.name, func(b *testing.B) {
			var arrived sync.WaitGroup
			var release chan struct{}
			hold := runtime.Syscall{Name: "test.hold", Func: func(ctx context.Context, _ *runtime.Call, _ [][]byte) (uint64, error) {
				arrived.Done()
				select {
				case <-release:
					return 0, nil
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			}}
			rt := warmRuntime(b, path.plain, []runtime.Syscall{hold}, runtime.Config{})
			deployLocal(b, rt, "hold", "hold.wasm")
			ctx := context.Background()
			// One call first, so that what is compiled or pooled once is in
			// the RSS before, not counted against the calls.
			release = make(chan struct{})
			close(release)
			arrived.Add(1)
			if _, err := rt.Call(ctx, "hold", "echo", benchArgs); err != nil {
				b.Fatal(err)
			}
			before := vmStatus(b)["VmRSS"]
			var held map[string]uint64
			for b.Loop() {
				release = make(chan struct{})
				arrived.Add(inFlight)
				errs := make(chan error, inFlight)
				for range inFlight {
					go func() {
						out, err := rt.Call(ctx, "hold", "echo", benchArgs)
						if err == nil && string(out.Result) != string(benchArgs) {
							err = fmt.Errorf("result %q", out.Result)
						}
						errs <- err
					}()
				}
				arrived.Wait()
				held = vmStatus(b)
				close(release)
				for range inFlight {
					if err := <-errs; err != nil {
						b.Fatal(err)
					}
				}
			}
			const mb = 1 << 20
			b.ReportMetric(float64(held["VmRSS"])/mb, "MB-rss")
			b.ReportMetric(float64(held["VmHWM"])/mb, "MB-hwm")
			b.ReportMetric(float64(int64(held["VmRSS"])-int64(before))/inFlight/1024, "KB/call")
		})
	}
}

// vmStatus reads the byte counts of /proc/self/status (VmRSS, VmHWM, ...)
// at once, so that they are of one moment; procStatus in memory_test.go reads
// one field for a test.
func vmStatus(b *testing.B) map[string]uint64 {
	b.Helper()
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc/self/status: %v", err)
	}
	fields := map[string]uint64{}
	s := bufio.NewScanner(bytes.NewReader(raw))
	for s.Scan() {
		name, value, ok := strings.Cut(s.Text(), ":")
		value, isKB := strings.CutSuffix(strings.TrimSpace(value), " kB")
		if !ok || !isKB {
			continue
		}
		if n, err := strconv.ParseUint(value, 10, 64); err == nil {
			fields[name] = n << 10
		}
	}
	return fields
}

// benchBareEcho does what a call of the echo does with wazero alone and the
// least host code that can: instantiate, call, close. The reference the
// runtime's overhead is measured against.
func benchBareEcho(b *testing.B) {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(true))
	defer r.Close(ctx)
	compiled := bareModule(b, r, fixture(b, "echo.wasm"), func() []byte { return benchArgs })
	config := wazero.NewModuleConfig().WithName("").WithStartFunctions().WithRandSource(rand.Reader)
	b.ReportAllocs()
	for b.Loop() {
		var result []byte
		cctx := context.WithValue(ctx, bareResultKey{}, &result)
		m, err := r.InstantiateModule(cctx, compiled, config)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.ExportedFunction("berm_tool_echo").Call(cctx); err != nil {
			b.Fatal(err)
		}
		m.Close(ctx)
		if string(result) != string(benchArgs) {
			b.Fatalf("%q", result)
		}
	}
}

type bareResultKey struct{}

// bareModule instantiates in r a berm host module with the three core
// syscalls a tool needs (arguments from args, the result into the
// *[]byte under bareResultKey in the call's context) and compiles image.
func bareModule(b *testing.B, r wazero.Runtime, image []byte, args func() []byte) wazero.CompiledModule {
	b.Helper()
	ctx := context.Background()
	_, err := r.NewHostModuleBuilder("berm").NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, stack []uint64) {
			ptr, n := uint32(stack[1]), uint32(stack[2])
			a := args()
			switch stack[0] {
			case runtime.Number(runtime.SysArgsLen):
				stack[0] = uint64(len(a))
			case runtime.Number(runtime.SysArgsRead):
				m.Memory().Write(ptr, a[:min(int(n), len(a))])
				stack[0] = uint64(len(a))
			case runtime.Number(runtime.SysResult):
				out := ctx.Value(bareResultKey{}).(*[]byte)
				bs, _ := m.Memory().Read(ptr, n)
				*out = append((*out)[:0], bs...)
				stack[0] = 0
			}
		}), []api.ValueType{api.ValueTypeI64, api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}).
		Export("syscall").Instantiate(ctx)
	if err != nil {
		b.Fatal(err)
	}
	compiled, err := r.CompileModule(ctx, image)
	if err != nil {
		b.Fatal(err)
	}
	return compiled
}
