package runtime_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berm-dev/berm/runtime"
)

// observed records what an Observer is given.
type observed struct {
	mu        sync.Mutex
	compiles  []runtime.CacheResult
	instances []string
}

func (o *observed) observer() runtime.Observer {
	return runtime.Observer{
		Compile: func(d time.Duration, cache runtime.CacheResult) {
			o.mu.Lock()
			defer o.mu.Unlock()
			if d <= 0 {
				panic("a compile of no time")
			}
			o.compiles = append(o.compiles, cache)
		},
		Instantiate: func(program string, d time.Duration) {
			o.mu.Lock()
			defer o.mu.Unlock()
			if d <= 0 {
				panic("an instantiation of no time")
			}
			o.instances = append(o.instances, program)
		},
	}
}

func (o *observed) take() (compiles []runtime.CacheResult, instances []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	compiles, instances = o.compiles, o.instances
	o.compiles, o.instances = nil, nil
	return compiles, instances
}

func TestObserveCompile(t *testing.T) {
	dir := t.TempDir()
	var o observed
	rt := newRuntime(t, &runtime.Config{CacheDir: dir, Observer: o.observer()})
	step := func(what string, want ...runtime.CacheResult) {
		t.Helper()
		if got, _ := o.take(); !slices.Equal(got, want) {
			t.Errorf("%s: compiles %q, want %q", what, got, want)
		}
	}
	deploy(t, rt, "core", "core.wasm")
	step("first deploy", runtime.CacheMiss)
	deploy(t, rt, "echo", "echo.wasm")
	step("another image", runtime.CacheMiss)
	deploy(t, rt, "core2", "core.wasm")
	step("the same image under another name (in memory)", runtime.CacheHit)

	// Another runtime on the same directory, as another process: from disk.
	var other observed
	second := newRuntime(t, &runtime.Config{CacheDir: dir, Observer: other.observer()})
	deploy(t, second, "core", "core.wasm")
	if got, _ := other.take(); !slices.Equal(got, []runtime.CacheResult{runtime.CacheHit}) {
		t.Errorf("second runtime: compiles %q, want hit", got)
	}

	// A damaged entry, in a third runtime that has nothing in memory.
	for _, e := range cacheEntries(t, dir) {
		if err := os.WriteFile(e, []byte("not a compiled module at all"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var third observed
	deploy(t, newRuntime(t, &runtime.Config{CacheDir: dir, Observer: third.observer()}), "core", "core.wasm")
	if got, _ := third.take(); !slices.Equal(got, []runtime.CacheResult{runtime.CacheRepair}) {
		t.Errorf("damaged entry: compiles %q, want repair", got)
	}

	// Nothing is observed of a refused image.
	if _, err := rt.Deploy(context.Background(), "broken", []byte("\x00asm\x01\x00\x00\x00\x05"), nil); err == nil {
		t.Fatal("a broken image deployed")
	}
	step("refused image")

	// Without a cache directory, the time without a result.
	var none observed
	deploy(t, newRuntime(t, &runtime.Config{Observer: none.observer()}), "core", "core.wasm")
	if got, _ := none.take(); !slices.Equal(got, []runtime.CacheResult{runtime.CacheNone}) {
		t.Errorf("no cache: compiles %q, want none", got)
	}
}

func TestObserveInstantiate(t *testing.T) {
	var o observed
	rt := newRuntime(t, &runtime.Config{Observer: o.observer()})
	ctx := context.Background()
	// The snapshot's instance, made at the first call, is not the call's.
	deploy(t, rt, "init", "init.wasm").Warm(ctx)
	deploy(t, rt, "nest", "nest.wasm")
	deploy(t, rt, "core", "core.wasm")
	o.take()
	for _, c := range []struct {
		program, tool, args string
		want                []string
	}{
		{"init", "ready", `{}`, []string{"init"}},                                // _initialize ran, within the time
		{"nest", "call_echo", `{}`, []string{"nest", "nest"}},                    // the nested call's instance too
		{"core", "trap", `{}`, []string{"core"}},                                 // ready, then the tool trapped
		{"core", "strict", `{"n":"x"}`, nil},                                     // refused before any instance
		{"nest", "down", `{}`, []string{"nest", "nest", "nest", "nest", "nest"}}, // depth 4 and the top
	} {
		rt.Call(ctx, c.program, c.tool, []byte(c.args))
		if _, got := o.take(); !slices.Equal(got, c.want) {
			t.Errorf("%s.%s: instances %q, want %q", c.program, c.tool, got, c.want)
		}
	}
}

func ExampleObserver() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "cache-")
	defer os.RemoveAll(dir)
	rt, err := runtime.New(ctx, runtime.Config{
		CacheDir: dir,
		Observer: runtime.Observer{
			Compile:     func(d time.Duration, cache runtime.CacheResult) { fmt.Println("compile:", cache) },
			Instantiate: func(program string, d time.Duration) { fmt.Println("instance of", program) },
		},
	})
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)
	image, _ := os.ReadFile("../testdata/core.wasm")
	for _, name := range []string{"core", "again"} {
		if _, err := rt.Deploy(ctx, name, image, nil); err != nil {
			panic(err)
		}
	}
	if _, err := rt.Call(ctx, "core", "echo", []byte(`{}`)); err != nil {
		panic(err)
	}
	// Output:
	// compile: miss
	// compile: hit
	// instance of core
}
