package service_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	"github.com/berm-dev/berm/internal/service"
	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/store"
)

func fixture(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type env struct {
	st *store.Store
	rt *runtime.Runtime
}

func newEnv(t *testing.T) env {
	t.Helper()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return env{st: st, rt: newRuntime(t, st)}
}

func newRuntime(t *testing.T, st *store.Store) *runtime.Runtime {
	t.Helper()
	rt, err := runtime.New(context.Background(), runtime.Config{CacheDir: st.CacheDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	return rt
}

// deployElsewhere deploys as another process would: its own runtime and
// service over the same root.
func (e env) deployElsewhere(t *testing.T, name string, image []byte) string {
	t.Helper()
	info, err := service.New(newRuntime(t, e.st), e.st, nil).Deploy(context.Background(), name, image, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return info.Digest
}

// record writes a deployment into the store without compiling it, as a
// deploy that was never served would leave it.
func (e env) record(t *testing.T, name string, image []byte) {
	t.Helper()
	digest, err := e.st.PutImage(image)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.Deploy(store.Deployment{Name: name, Digest: digest}); err != nil {
		t.Fatal(err)
	}
}

// recorder keeps the changes a started service reports.
type recorder struct {
	mu      sync.Mutex
	changes []service.Change
}

func (r *recorder) add(c service.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, c)
}

func start(t *testing.T, svc *service.Service, onChange func(service.Change)) {
	t.Helper()
	if err := svc.Start(context.Background(), onChange); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := svc.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
}

// A program replaced while the first load still compiles it must not come
// back when that compile finishes: the runtime ends up with the newest
// deployment, and so do the served programs.
func TestReplaceDuringFirstCompile(t *testing.T) {
	e := newEnv(t)
	slow := fixture(t, "examples/hello/hello.wasm") // a Go program: seconds to compile cold
	e.record(t, "p", slow)
	rt := newRuntime(t, e.st)
	svc := service.New(rt, e.st, &service.Options{PollInterval: time.Hour})
	start(t, svc, nil)
	// Listed at once, and listing never waits behind the compile.
	if got := svc.Program("p"); got == nil || got.Digest != manifest.Digest(slow) {
		t.Fatalf("first load lists %+v, want the slow program at once", got)
	}
	if _, err := svc.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-svc.Loaded():
		t.Log("the compile finished before the replace: the race under test was not met")
	default:
	}
	fast := fixture(t, "testdata/echo.wasm")
	digest := e.deployElsewhere(t, "p", fast)
	if err := svc.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-svc.Loaded()
	if p := rt.Program("p"); p == nil || p.Digest != digest {
		t.Fatalf("runtime runs %v after the slow compile finished, want the newest deployment %s", p, digest)
	}
	if p := svc.Program("p"); p == nil || p.Digest != digest {
		t.Fatalf("served %+v, want the newest deployment %s", p, digest)
	}
	out, err := rt.Call(context.Background(), "p", "echo", []byte(`{"message":"hi"}`))
	if err != nil || string(out.Result) != `{"message":"hi"}` {
		t.Fatalf("call = %q, %v", out.Result, err)
	}
}

// A damaged record is reported and skipped: the rest is listed and served.
func TestDamagedRecord(t *testing.T) {
	e := newEnv(t)
	e.deployElsewhere(t, "echo", fixture(t, "testdata/echo.wasm"))
	if err := os.WriteFile(filepath.Join(e.st.Root(), "deployments", "zz.json"), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	svc := service.New(e.rt, e.st, nil)
	list, err := svc.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "echo" || list[0].Error != "" || list[1].Name != "zz" || list[1].Error == "" {
		t.Fatalf("list = %+v, want echo fine and zz with its error", list)
	}
	var rec recorder
	start(t, svc, rec.add)
	<-svc.Loaded()
	if p := svc.Program("echo"); p == nil {
		t.Fatal("echo is not served beside a damaged record")
	}
	// A removal is still seen: the sync goes on past the damaged record.
	if err := e.st.Remove("echo", false); err != nil {
		t.Fatal(err)
	}
	if err := svc.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p := svc.Program("echo"); p != nil {
		t.Fatal("echo is still served after its removal")
	}
	if _, err := e.rt.Call(context.Background(), "echo", "echo", []byte(`{}`)); !errors.Is(err, runtime.ErrNoProgram) {
		t.Fatalf("call after removal = %v, want ErrNoProgram", err)
	}
}

// Deploy on a started service serves the program before it returns; a
// refused image changes nothing.
func TestDeployServes(t *testing.T) {
	e := newEnv(t)
	svc := service.New(e.rt, e.st, &service.Options{PollInterval: time.Hour})
	var rec recorder
	start(t, svc, rec.add)
	info, err := svc.Deploy(context.Background(), "echo", fixture(t, "testdata/echo.wasm"), "echo.wasm", nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := svc.Program("echo"); p == nil || p.Digest != info.Digest {
		t.Fatalf("served %+v after Deploy, want %s", p, info.Digest)
	}
	if _, err := e.rt.Call(context.Background(), "echo", "echo", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	_, err = svc.Deploy(context.Background(), "echo", fixture(t, "testdata/broken/no_memory.wasm"), "", nil)
	if !errors.Is(err, manifest.ErrInvalid) {
		t.Fatalf("deploy of a broken image = %v, want ErrInvalid", err)
	}
	if p := svc.Program("echo"); p == nil || p.Digest != info.Digest {
		t.Fatalf("a refused deploy changed what is served: %+v", p)
	}
	if err := svc.Remove(context.Background(), "echo", false); err != nil {
		t.Fatal(err)
	}
	if svc.Program("echo") != nil || e.rt.Program("echo") != nil {
		t.Fatal("removed program still served")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.changes) != 2 || rec.changes[0].Served == nil || rec.changes[1].Removed != "echo" {
		t.Fatalf("changes = %+v, want served then removed", rec.changes)
	}
}

// The store refuses names that are not program names, whoever calls it.
func TestRefusesBadNames(t *testing.T) {
	e := newEnv(t)
	svc := service.New(e.rt, e.st, nil)
	for _, name := range []string{"../leak", "..%2F..%2Fleak", "a/b", "", "UPPER"} {
		if _, err := svc.Inspect(context.Background(), name); !errors.Is(err, manifest.ErrProgramName) {
			t.Errorf("Inspect(%q) = %v, want ErrProgramName", name, err)
		}
		if err := svc.Remove(context.Background(), name, false); !errors.Is(err, manifest.ErrProgramName) {
			t.Errorf("Remove(%q) = %v, want ErrProgramName", name, err)
		}
		if _, err := svc.Deploy(context.Background(), name, fixture(t, "testdata/echo.wasm"), "", nil); !errors.Is(err, manifest.ErrProgramName) {
			t.Errorf("Deploy(%q) = %v, want ErrProgramName", name, err)
		}
	}
}

// Close stops every goroutine Start began: ten services leave none behind.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	e := newEnv(t)
	e.deployElsewhere(t, "echo", fixture(t, "testdata/echo.wasm"))
	before := goruntime.NumGoroutine()
	for range 10 {
		svc := service.New(e.rt, e.st, &service.Options{PollInterval: time.Millisecond})
		if err := svc.Start(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		if err := svc.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// Goroutines end just after they signal it; give them a moment, bounded.
	deadline := time.Now().Add(5 * time.Second)
	for goruntime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := goruntime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines left behind:\n%s", n-before, buf[:goruntime.Stack(buf, true)])
	}
}

// Closing the service, then the runtime, while the first load still compiles
// never lets a compile outlive the runtime (it once panicked in wazero's store
// about one run in fifty).
func TestCloseDuringFirstCompile(t *testing.T) {
	e := newEnv(t)
	e.record(t, "echo", fixture(t, "testdata/echo.wasm"))
	e.record(t, "core", fixture(t, "testdata/core.wasm"))
	for range 50 {
		rt, err := runtime.New(context.Background(), runtime.Config{}) // no cache: every compile is real
		if err != nil {
			t.Fatal(err)
		}
		svc := service.New(rt, e.st, nil)
		if err := svc.Start(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		if err := svc.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := rt.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-svc.Loaded():
		default:
			t.Fatal("Close returned before the first load's compiles ended")
		}
	}
}

// blinking is a state whose next reads fail as a database's do while it is
// briefly unreachable: failImages calls of Image, failLists of Deployments.
type blinking struct {
	store.State
	mu                    sync.Mutex
	failImages, failLists int
}

func (b *blinking) Image(digest string) ([]byte, error) {
	b.mu.Lock()
	fail := b.failImages > 0
	b.failImages--
	b.mu.Unlock()
	if fail {
		return nil, fmt.Errorf("postgres at 127.0.0.1:5432: %w: connection refused", store.ErrUnavailable)
	}
	return b.State.Image(digest)
}

func (b *blinking) Deployments() ([]store.Deployment, []store.Damaged, error) {
	b.mu.Lock()
	fail := b.failLists > 0
	b.failLists--
	b.mu.Unlock()
	if fail {
		return nil, nil, fmt.Errorf("postgres at 127.0.0.1:5432: %w: connection refused", store.ErrUnavailable)
	}
	return b.State.Deployments()
}

// A deployment whose image could not be read while the state was briefly
// unavailable is read again at the next pass, not given up until a
// redeploy as a damaged one is.
func TestUnavailableImageRetried(t *testing.T) {
	e := newEnv(t)
	st := &blinking{State: e.st}
	svc := service.New(e.rt, st, &service.Options{PollInterval: time.Hour})
	start(t, svc, nil)
	<-svc.Loaded()
	e.record(t, "echo", fixture(t, "testdata/echo.wasm"))
	st.failImages = 1
	if err := svc.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p := svc.Program("echo"); p != nil {
		t.Fatal("echo is served though its image could not be read")
	}
	if err := svc.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p := svc.Program("echo"); p == nil {
		t.Fatal("echo is not served once its image can be read again: the blip marked it failed")
	}
}

// Start fails with ErrUnavailable, serving nothing, when the state is
// unavailable for its first pass (the deployments or an image), and may be
// called again, which serves everything.
func TestStartAgainAfterUnavailable(t *testing.T) {
	for name, st := range map[string]*blinking{
		"deployments": {failLists: 1},
		"image":       {failImages: 1},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.record(t, "echo", fixture(t, "testdata/echo.wasm"))
			e.record(t, "other", fixture(t, "testdata/echo.wasm"))
			st.State = e.st
			var rec recorder
			svc := service.New(e.rt, st, &service.Options{PollInterval: time.Hour})
			if err := svc.Start(context.Background(), rec.add); !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("Start with the state unavailable = %v, want ErrUnavailable", err)
			}
			if served := svc.Served(); len(served) != 0 || len(rec.changes) != 0 {
				t.Fatalf("a failed Start served %d programs and reported %d changes, want none", len(served), len(rec.changes))
			}
			start(t, svc, rec.add)
			<-svc.Loaded()
			if served := svc.Served(); len(served) != 2 {
				t.Fatalf("served %d programs after Start again, want 2", len(served))
			}
		})
	}
}
