package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/berm-dev/berm/runtime"
)

// newRuntime returns a runtime with the core syscalls and default limits,
// closed when the test ends.
func newRuntime(tb testing.TB, opts *runtime.Config) *runtime.Runtime {
	tb.Helper()
	return newRuntimeDepth(tb, runtime.DefaultCallDepth, nil, opts)
}

func newRuntimeDepth(tb testing.TB, depth int, syscalls []runtime.Syscall, opts *runtime.Config) *runtime.Runtime {
	tb.Helper()
	ctx := context.Background()
	cfg := runtime.Config{}
	if opts != nil {
		cfg = *opts
	}
	cfg.MaxCallDepth, cfg.Syscalls = depth, syscalls
	// BERM_PLAIN=1 runs every test on the plain path.
	if os.Getenv("BERM_PLAIN") == "1" {
		cfg.Plain = true
	}
	rt, err := runtime.New(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rt.Close(ctx) })
	return rt
}

func fixture(tb testing.TB, file string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", file))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func deploy(tb testing.TB, rt *runtime.Runtime, name, file string) *runtime.Program {
	tb.Helper()
	p, err := rt.Deploy(context.Background(), name, fixture(tb, file), nil)
	if err != nil {
		tb.Fatalf("deploy %s: %v", file, err)
	}
	return p
}

// deployLocal deploys a fixture of this package's own testdata/.
func deployLocal(tb testing.TB, rt *runtime.Runtime, name, file string) *runtime.Program {
	tb.Helper()
	image, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		tb.Fatal(err)
	}
	p, err := rt.Deploy(context.Background(), name, image, nil)
	if err != nil {
		tb.Fatalf("deploy %s: %v", file, err)
	}
	return p
}
