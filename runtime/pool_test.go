package runtime_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/host"
	"github.com/berm-dev/berm/runtime/sandbox"
)

var plainEnv = os.Getenv("BERM_PLAIN") == "1"

// poolRuntime is a runtime with WASI, under BERM_PLAIN as every test's.
func poolRuntime(t testing.TB, opts runtime.Config) *runtime.Runtime {
	t.Helper()
	opts.Imports = []runtime.HostModule{host.WASI()}
	if opts.ModuleConfig == nil {
		opts.ModuleConfig = host.ModuleConfig()
	}
	return newRuntime(t, &opts)
}

func deployPool(t testing.TB, rt *runtime.Runtime, name string, g *sandbox.Grants) *runtime.Program {
	t.Helper()
	return deployPoolFile(t, rt, name, "pool.wasm", g)
}

// The two images of the pool fixture: one copied into each instance's
// memory, one mapped (over 256 KiB), which a reset restores page by page.
var poolImages = []string{"pool.wasm", "pool_big.wasm"}

func deployPoolFile(t testing.TB, rt *runtime.Runtime, name, file string, g *sandbox.Grants) *runtime.Program {
	t.Helper()
	p, err := rt.Deploy(context.Background(), name, localImage(t, file), g)
	if err != nil {
		t.Fatalf("deploy %s: %v", name, err)
	}
	return p
}

// leak calls pool.leak, which must find its instance as new.
func leak(t testing.TB, rt *runtime.Runtime, program string) {
	t.Helper()
	out, err := rt.Call(context.Background(), program, "leak", []byte(`{}`))
	if err != nil || string(out.Result) != "clean" {
		t.Fatalf("%s.leak: %q, %v; want clean", program, out.Result, err)
	}
}

// reused returns the calls of p that ran in a reset instance, and fails
// the test when p is not pooled on the default path (and when it is on the
// plain one).
func reused(t testing.TB, p *runtime.Program) int64 {
	t.Helper()
	n, pooled := runtime.Reused(p)
	if pooled == plainEnv {
		t.Fatalf("%s: pooled %v on the plain path %v", p.Name, pooled, plainEnv)
	}
	return n
}

// Calls one after the other reuse an instance, and none sees what the one
// before it left: in memory, exported and unexported globals, memory's
// size, the table, WASI's descriptors; after a call that grew memory,
// trapped, ran out of time, closed stdout or opened a file.
func TestPoolNoLeak(t *testing.T) {
	for _, file := range poolImages {
		t.Run(file, func(t *testing.T) { testPoolNoLeak(t, file) })
	}
}

func testPoolNoLeak(t *testing.T, file string) {
	dir := t.TempDir()
	rt := poolRuntime(t, runtime.Config{Limits: runtime.Limits{Deadline: 2 * time.Second}})
	p := deployPoolFile(t, rt, "pool", file, &sandbox.Grants{Dirs: []sandbox.Dir{{Host: dir, Guest: "/d", Write: true}}})
	ctx := context.Background()
	for range 5 {
		leak(t, rt, "pool")
	}
	if n := reused(t, p); !plainEnv && n < 4 {
		t.Fatalf("5 calls reused an instance %d times, want at least 4", n)
	}
	cases := []struct {
		tool string
		err  error
	}{
		{"grow", nil},
		{"trap", runtime.ErrTrap},
		{"fds", nil},
		{"spin", runtime.ErrDeadline},
		{"print", nil},
	}
	for _, c := range cases {
		t.Run(c.tool, func(t *testing.T) {
			leak(t, rt, "pool") // an instance idle, scribbled on and reset
			out, err := rt.Call(ctx, "pool", c.tool, []byte(`{}`))
			if !errors.Is(err, c.err) || (c.err == nil && string(out.Result) != "done") {
				t.Fatalf("%s: %q, %v; want %v", c.tool, out.Result, err, c.err)
			}
			for range 3 {
				leak(t, rt, "pool")
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "f")); err != nil {
		t.Errorf("fds did not open its file, so the test of its descriptor is void: %v", err)
	}
}

// Many calls at once, of every tool, each find their instance as new.
func TestPoolConcurrent(t *testing.T) {
	for _, file := range poolImages {
		t.Run(file, func(t *testing.T) { testPoolConcurrent(t, file) })
	}
}

func testPoolConcurrent(t *testing.T, file string) {
	rt := poolRuntime(t, runtime.Config{Limits: runtime.Limits{Deadline: 5 * time.Second}})
	p := deployPoolFile(t, rt, "pool", file, &sandbox.Grants{Dirs: []sandbox.Dir{{Host: t.TempDir(), Guest: "/d", Write: true}}})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 16*50)
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				tool := "leak"
				if (g+i)%5 == 4 {
					tool = []string{"grow", "trap", "fds", "print"}[(g+i/5)%4]
				}
				out, err := rt.Call(ctx, "pool", tool, []byte(`{}`))
				switch {
				case tool == "leak" && (err != nil || string(out.Result) != "clean"):
					errs <- errors.New("leak: " + string(out.Result))
				case tool == "trap" && !errors.Is(err, runtime.ErrTrap):
					errs <- errors.New("trap did not trap")
				case tool != "leak" && tool != "trap" && err != nil:
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := reused(t, p); !plainEnv && n == 0 {
		t.Error("no call reused an instance")
	}
}

// stdout goes to the log of the call running, not the one that made the
// instance.
func TestPoolOutput(t *testing.T) {
	var mu sync.Mutex
	var tools []string
	rt := poolRuntime(t, runtime.Config{Log: func(_ context.Context, _, tool string, line []byte) {
		mu.Lock()
		tools = append(tools, tool+": "+string(line))
		mu.Unlock()
	}})
	p := deployPool(t, rt, "pool", nil)
	ctx := context.Background()
	for _, tool := range []string{"print", "leak", "print"} {
		if _, err := rt.Call(ctx, "pool", tool, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"print: printed", "print: printed"}; !slices.Equal(tools, want) {
		t.Errorf("log %q, want %q", tools, want)
	}
	if n := reused(t, p); !plainEnv && n < 2 {
		t.Errorf("3 calls reused an instance %d times, want 2", n)
	}
}

// Idle instances hold no part of Limits.TotalMemory: two programs of one
// page each take turns under a total that holds their images (charged for
// the programs' lives) and one instance, but not two.
func TestPoolBudget(t *testing.T) {
	held, _ := runtime.ImageBytes(deployPool(t, poolRuntime(t, runtime.Config{}), "a", nil))
	rt := poolRuntime(t, runtime.Config{Limits: runtime.Limits{TotalMemory: 2*held + 2*runtime.PageSize - 1}})
	deployPool(t, rt, "a", nil)
	deployPool(t, rt, "b", nil)
	for range 3 {
		leak(t, rt, "a")
		leak(t, rt, "b")
	}
}

// A program replaced or removed closes its idle instances.
func TestPoolRetire(t *testing.T) {
	rt := poolRuntime(t, runtime.Config{})
	old := deployPool(t, rt, "pool", nil)
	leak(t, rt, "pool")
	if idle := runtime.Idle(old); !plainEnv && idle != 1 {
		t.Fatalf("%d idle instances after a call, want 1", idle)
	}
	next := deployPool(t, rt, "pool", nil)
	if idle := runtime.Idle(old); idle != 0 {
		t.Errorf("the replaced program holds %d idle instances, want 0", idle)
	}
	leak(t, rt, "pool")
	rt.Remove("pool")
	if idle := runtime.Idle(next); idle != 0 {
		t.Errorf("the removed program holds %d idle instances, want 0", idle)
	}
}

// The Go example's calls reuse their instance: what its runtime does in a
// call changes no descriptor.
func TestPoolGo(t *testing.T) {
	rt := poolRuntime(t, runtime.Config{})
	p, err := rt.Deploy(context.Background(), "hello", exampleImage(t, "hello"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Ada", "Grace", "Ada", "Linus"} {
		out, err := rt.Call(context.Background(), "hello", "greet", []byte(`{"name":"`+name+`"}`))
		check(t, out, err, want{result: "Hello, " + name + "!"})
	}
	if n := reused(t, p); !plainEnv && n < 3 {
		t.Errorf("4 calls reused an instance %d times, want 3", n)
	}
}
