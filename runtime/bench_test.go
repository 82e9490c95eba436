package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/host"
)

var benchArgs = []byte(`{"message":"hello"}`)

// BenchmarkCall is one call of a tiny echo tool through the runtime:
// arguments checked, a fresh instance, arguments in, result out, closed.
func BenchmarkCall(b *testing.B) {
	ctx := context.Background()
	rt := newRuntime(b, nil)
	deploy(b, rt, "echo", "echo.wasm")
	b.ReportAllocs()
	for b.Loop() {
		out, err := rt.Call(ctx, "echo", "echo", benchArgs)
		if err != nil || string(out.Result) != string(benchArgs) {
			b.Fatalf("%q, %v", out.Result, err)
		}
	}
}

// BenchmarkBareWazero does what BenchmarkCall does with wazero alone and the
// least host code that can: the baseline the runtime's overhead is measured
// against.
func BenchmarkBareWazero(b *testing.B) { benchBareEcho(b) }

// BenchmarkCallGo is one call of the Go-built example's greet tool: a 3 MB
// module whose Go runtime starts in _initialize on every call.
func BenchmarkCallGo(b *testing.B) {
	ctx := context.Background()
	kv := memoryKV{}
	rt := newRuntimeDepth(b, runtime.DefaultCallDepth, host.Syscalls(kv), &runtime.Options{
		Imports:      []runtime.HostModule{host.WASI()},
		ModuleConfig: host.ModuleConfig(),
	})
	image, err := os.ReadFile(filepath.Join("..", "examples", "hello", "hello.wasm"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := rt.Deploy(ctx, "hello", image, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		out, err := rt.Call(ctx, "hello", "greet", []byte(`{"name":"bench"}`))
		if err != nil || string(out.Result) != "Hello, bench!" {
			b.Fatalf("%q, %v", out.Result, err)
		}
	}
}

// memoryKV is data that lasts the benchmark.
type memoryKV map[string][]byte

func (m memoryKV) Get(program string, key []byte) ([]byte, bool, error) {
	v, ok := m[program+"\x00"+string(key)]
	return v, ok, nil
}

func (m memoryKV) Set(program string, key, value []byte) error {
	m[program+"\x00"+string(key)] = append([]byte(nil), value...)
	return nil
}

func (m memoryKV) Delete(program string, key []byte) error {
	delete(m, program+"\x00"+string(key))
	return nil
}
