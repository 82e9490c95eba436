package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/host"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// The ways a program's calls can start: from the snapshot (the default),
// with _initialize at each call (the deployment's opt-out), and on the plain
// path (Options.Plain). Under BERM_PLAIN=1 the default is the plain path.
type startMode struct {
	name   string
	plain  bool
	each   bool // sandbox.Grants.InitEachCall
	frozen bool // what _initialize read stays the same from call to call
}

func startModes() []startMode {
	plainEnv := os.Getenv("BERM_PLAIN") == "1"
	return []startMode{
		{name: "snapshot", frozen: !plainEnv},
		{name: "init each call", each: true},
		{name: "plain", plain: true},
	}
}

// startRuntime is a runtime with WASI and the host's syscalls, on the plain
// path when plain (whatever BERM_FAST says).
func startRuntime(t testing.TB, plain bool, log func(ctx context.Context, program, tool string, line []byte), limits ...runtime.Limits) *runtime.Runtime {
	t.Helper()
	opts := &runtime.Options{
		Imports:      []runtime.HostModule{host.WASI()},
		ModuleConfig: host.ModuleConfig(),
		Log:          log,
	}
	if len(limits) > 0 {
		opts.Limits = limits[0]
	}
	if !plain {
		return newRuntimeDepth(t, runtime.DefaultCallDepth, host.Syscalls(memoryKV{}), opts)
	}
	opts.Plain = true
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.DefaultCallDepth, host.Syscalls(memoryKV{}), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	return rt
}

func deployMode(t testing.TB, rt *runtime.Runtime, m startMode, name string, image []byte, g *sandbox.Grants) {
	t.Helper()
	if m.each {
		if g == nil {
			g = &sandbox.Grants{}
		}
		g.InitEachCall = true
	}
	if _, err := rt.Deploy(context.Background(), name, image, g); err != nil {
		t.Fatalf("deploy %s: %v", name, err)
	}
}

func localImage(t testing.TB, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// No call sees what another left: not in memory (a cell, a data segment,
// the grown page), not in a global (exported or not), not in memory's size,
// not in a table; one after the other and many at once.
func TestSnapshotNoLeak(t *testing.T) {
	for _, m := range startModes() {
		t.Run(m.name, func(t *testing.T) {
			rt := startRuntime(t, m.plain, nil)
			deployMode(t, rt, m, "warm", localImage(t, "warm.wasm"), nil)
			deployMode(t, rt, m, "warm-table", localImage(t, "warm_table.wasm"), nil)
			ctx := context.Background()
			for _, program := range []string{"warm", "warm-table"} {
				for range 5 {
					out, err := rt.Call(ctx, program, "leak", []byte(`{}`))
					if err != nil || string(out.Result) != "clean" {
						t.Fatalf("%s.leak: %q, %v; want clean", program, out.Result, err)
					}
				}
			}
			var wg sync.WaitGroup
			errs := make(chan string, 16*20)
			for g := range 16 {
				wg.Go(func() {
					program := []string{"warm", "warm-table"}[g%2]
					for range 20 {
						out, err := rt.Call(ctx, program, "leak", []byte(`{}`))
						if err != nil || string(out.Result) != "clean" {
							errs <- program + ": " + string(out.Result)
							if err != nil {
								errs <- err.Error()
							}
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
		})
	}
}

// What _initialize read from the host (the clock, random bytes) is frozen
// at deploy with the snapshot, and read afresh for each call with the
// opt-out and on the plain path; random bytes a call reads itself are fresh
// on every path.
func TestSnapshotFreezesInit(t *testing.T) {
	envGrant := &sandbox.Grants{Env: []sandbox.Env{{Name: "BERM_TEST_UNSET_VARIABLE"}}}
	modes := append(startModes(), startMode{name: "environment read at each call"})
	for i, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			rt := startRuntime(t, m.plain, nil)
			var g *sandbox.Grants
			if i == len(modes)-1 {
				g = envGrant
			}
			deployMode(t, rt, m, "warm", localImage(t, "warm.wasm"), g)
			ctx := context.Background()
			var inits, randoms [][]byte
			for range 4 {
				out, err := rt.Call(ctx, "warm", "init", []byte(`{}`))
				if err != nil || len(out.Result) != 16 {
					t.Fatalf("init: %x, %v", out.Result, err)
				}
				inits = append(inits, out.Result)
				out, err = rt.Call(ctx, "warm", "random", []byte(`{}`))
				if err != nil || len(out.Result) != 8 {
					t.Fatalf("random: %x, %v", out.Result, err)
				}
				randoms = append(randoms, out.Result)
			}
			for k := 1; k < len(inits); k++ {
				if same := bytes.Equal(inits[k], inits[0]); same != m.frozen {
					t.Errorf("init read %x in call 0 and %x in call %d: frozen %v, want %v", inits[0], inits[k], k, same, m.frozen)
				}
				if bytes.Equal(randoms[k], randoms[k-1]) {
					t.Errorf("random bytes read during calls %d and %d are the same: %x", k-1, k, randoms[k])
				}
			}
		})
	}
}

// An _initialize that traps at deploy does not fail the deploy: it runs at
// each call instead, which fails as it always has, and the log says why.
func TestSnapshotInitTraps(t *testing.T) {
	var mu sync.Mutex
	var logs []string
	rt := startRuntime(t, false, func(_ context.Context, program, tool string, line []byte) {
		mu.Lock()
		logs = append(logs, program+" "+tool+": "+string(line))
		mu.Unlock()
	})
	deploy(t, rt, "bad-init", "init_syscall.wasm")
	for range 2 {
		out, err := rt.Call(context.Background(), "bad-init", "t", []byte(`{}`))
		if !errors.Is(err, runtime.ErrTrap) || !strings.Contains(err.Error(), "_initialize") || !strings.Contains(err.Error(), "berm.args.len") {
			t.Fatalf("call: %q, %v; want a trap in _initialize naming berm.args.len", out.Result, err)
		}
	}
	if os.Getenv("BERM_PLAIN") == "1" {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logs) != 1 || !strings.HasPrefix(logs[0], "bad-init _initialize: berm: _initialize at deploy") || !strings.Contains(logs[0], "at each call") {
		t.Errorf("log %q, want one line on why _initialize runs at each call", logs)
	}
}

// berm.log during the snapshot's _initialize goes to the log, as the
// program's line under the tool "_initialize"; calls then log nothing.
func TestSnapshotLogsInit(t *testing.T) {
	var mu sync.Mutex
	var logs []string
	rt := startRuntime(t, false, func(_ context.Context, program, tool string, line []byte) {
		mu.Lock()
		logs = append(logs, program+" "+tool+": "+string(line))
		mu.Unlock()
	})
	deploy(t, rt, "init", "init.wasm")
	mu.Lock()
	deployLogs := append([]string(nil), logs...)
	mu.Unlock()
	for range 3 {
		out, err := rt.Call(context.Background(), "init", "ready", []byte(`{}`))
		check(t, out, err, want{result: "ready"})
	}
	if os.Getenv("BERM_PLAIN") == "1" {
		return
	}
	if len(deployLogs) != 1 || deployLogs[0] != "init _initialize: initializing" {
		t.Errorf("deploy logged %q, want the line of _initialize", deployLogs)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logs) != 1 {
		t.Errorf("calls logged %q, want nothing more", logs[1:])
	}
}

func exampleImage(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", name, name+".wasm"))
	if err != nil {
		t.Skip(err)
	}
	return b
}

// A Go program answers the same from its snapshot as with _initialize at
// each call and on the plain path, a granted directory included (Go's
// runtime learns the preopens at init, under the deployment's mounts).
func TestSnapshotGo(t *testing.T) {
	hello := exampleImage(t, "hello")
	files := exampleImage(t, "files")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "todo.md"), []byte("water the plants\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, m := range startModes() {
		t.Run(m.name, func(t *testing.T) {
			rt := startRuntime(t, m.plain, nil)
			deployMode(t, rt, m, "hello", hello, nil)
			deployMode(t, rt, m, "files", files, &sandbox.Grants{Dirs: []sandbox.Dir{{Host: dir, Guest: "/notes"}}})
			ctx := context.Background()
			for _, name := range []string{"Ada", "Grace", "Ada"} {
				out, err := rt.Call(ctx, "hello", "greet", []byte(`{"name":"`+name+`"}`))
				check(t, out, err, want{result: "Hello, " + name + "!"})
			}
			out, err := rt.Call(ctx, "hello", "greet", []byte(`{"name":" "}`))
			if err != nil || !out.Failed || !strings.Contains(string(out.Failure), "name is empty") {
				t.Errorf("greet with a blank name: %+v, %v; want its failure", out, err)
			}
			for range 2 {
				out, err = rt.Call(ctx, "files", "read", []byte(`{"path":"/notes/todo.md"}`))
				check(t, out, err, want{result: "water the plants\n"})
			}
			out, err = rt.Call(ctx, "files", "list", []byte(`{"path":"/notes"}`))
			if err != nil || out.Failed || !strings.Contains(string(out.Result), `"todo.md"`) {
				t.Errorf("list /notes: %q %q, %v", out.Result, out.Failure, err)
			}
			out, err = rt.Call(ctx, "files", "read", []byte(`{"path":"/elsewhere/x"}`))
			if err != nil || !out.Failed {
				t.Errorf("read outside the grant: %+v, %v; want its failure", out, err)
			}
		})
	}
}

// A module whose instructions name data segments by index (memory.init,
// under a data count section) starts from its image with the indices kept.
func TestSnapshotSegmentIndices(t *testing.T) {
	image, err := os.ReadFile(filepath.Join("transform", "testdata", "segments.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range startModes() {
		t.Run(m.name, func(t *testing.T) {
			rt := startRuntime(t, m.plain, nil)
			deployMode(t, rt, m, "segments", image, nil)
			for range 2 {
				out, err := rt.Call(context.Background(), "segments", "t", []byte(`{}`))
				check(t, out, err, want{result: "passive"})
			}
		})
	}
}

// deployGrants deploys a fixture of testdata/ as m asks, with g.
func deployGrants(t *testing.T, rt *runtime.Runtime, m startMode, name, file string, g *sandbox.Grants) *runtime.Program {
	t.Helper()
	if m.each {
		if g == nil {
			g = &sandbox.Grants{}
		}
		g.InitEachCall = true
	}
	p, err := rt.Deploy(context.Background(), name, localImage(t, file), g)
	if err != nil {
		t.Fatalf("deploy %s: %v", file, err)
	}
	return p
}

// wantRefused checks that p's snapshot was refused for a reason containing
// why, on the default path, and that p says nothing of it otherwise.
func wantRefused(t *testing.T, p *runtime.Program, m startMode, why string) {
	t.Helper()
	if m.each || m.plain || plainEnv {
		if p.SnapshotRefused != "" {
			t.Errorf("SnapshotRefused %q, want empty where no snapshot is asked for", p.SnapshotRefused)
		}
		return
	}
	if !strings.Contains(p.SnapshotRefused, why) {
		t.Errorf("SnapshotRefused %q, want it to say %q", p.SnapshotRefused, why)
	}
}

// An _initialize that takes longer than a snapshot may run at deploy (here
// 2 s by the clock, against the 1 s bound, under a call deadline of 30 s)
// is stopped there and runs at each call instead, which answers as with
// the opt-out. Before the bound, the snapshot waited for it (a spinning one
// held Prepare for the whole call deadline).
func TestSnapshotSlowInit(t *testing.T) {
	for _, m := range startModes() {
		t.Run(m.name, func(t *testing.T) {
			rt := startRuntime(t, m.plain, nil)
			p := deployGrants(t, rt, m, "slow", "init_slow.wasm", nil)
			wantRefused(t, p, m, "_initialize did not finish within 1s at deploy")
			out, err := rt.Call(context.Background(), "slow", "t", []byte(`{}`))
			check(t, out, err, want{result: "ready"})
		})
	}
}

// An _initialize that leaves more memory than a snapshot may hold (20 MiB
// filled, against 16 MiB) runs at each call instead: the program holds no
// image of it, and its calls see what _initialize filled.
func TestSnapshotTooBig(t *testing.T) {
	for _, m := range startModes() {
		t.Run(m.name, func(t *testing.T) {
			rt := startRuntime(t, m.plain, nil)
			p := deployGrants(t, rt, m, "fat", "init_fat.wasm", nil)
			wantRefused(t, p, m, "_initialize left more than 16 MiB of memory at deploy")
			if held, _ := runtime.ImageBytes(p); held > 64<<10 {
				t.Errorf("the program's image holds %d bytes, want only its data segments'", held)
			}
			for range 2 {
				out, err := rt.Call(context.Background(), "fat", "t", []byte(`{}`))
				check(t, out, err, want{result: "filled"})
			}
		})
	}
}

// Under Limits.TotalMemory a program's image is charged for as long as the
// program lives, and a snapshot the budget cannot also take is not made: a
// snapshot of 1 MiB under a total of 1.5 MiB (an instance of 17 pages, 1.06
// MiB, fits; it and the image do not).
func TestSnapshotBudget(t *testing.T) {
	for _, m := range startModes() {
		t.Run(m.name, func(t *testing.T) {
			const total = 3 << 19
			rt := startRuntime(t, m.plain, nil, runtime.Limits{TotalMemory: total})
			p := deployGrants(t, rt, m, "fill", "init_fill.wasm", nil)
			wantRefused(t, p, m, "the limit on all instances' memory together (1536 KiB) cannot also take the image's")
			for range 2 {
				out, err := rt.Call(context.Background(), "fill", "t", []byte(`{}`))
				check(t, out, err, want{result: "filled"})
			}

			// One that fits is charged until the program is gone.
			small := startRuntime(t, m.plain, nil, runtime.Limits{TotalMemory: 64 << 20})
			p = deployGrants(t, small, m, "fill", "init_fill.wasm", nil)
			held, _ := runtime.ImageBytes(p)
			if !m.each && !m.plain && !plainEnv && (p.SnapshotRefused != "" || held < 1<<20) {
				t.Errorf("under 64 MiB: snapshot refused %q, image of %d bytes; want a snapshot of 1 MiB", p.SnapshotRefused, held)
			}
			if used := runtime.Budget(small); used != held {
				t.Errorf("budget used %d after deploy, want the image's %d", used, held)
			}
			out, err := small.Call(context.Background(), "fill", "t", []byte(`{}`))
			check(t, out, err, want{result: "filled"})
			if used := runtime.Budget(small); used != held {
				t.Errorf("budget used %d after a call, want the image's %d", used, held)
			}
			small.Remove("fill")
			if used := runtime.Budget(small); used != 0 {
				t.Errorf("budget used %d once the program is removed, want 0", used)
			}
		})
	}
}

// A module whose data segments would make an image holding more than an
// image may (4,352 bytes, one every 4 KiB, 17 MiB of pages) starts without
// one: its segments are applied by instantiation, the instance's memory
// counted as any other.
func TestSnapshotDataImageTooBig(t *testing.T) {
	rt := startRuntime(t, false, nil)
	p := deployGrants(t, rt, startMode{}, "sparse", "data_sparse.wasm", nil)
	if held, n := runtime.ImageBytes(p); held != 0 || n != 0 {
		t.Errorf("the program's image holds %d bytes of %d, want no image", held, n)
	}
	for range 2 {
		out, err := rt.Call(context.Background(), "sparse", "t", []byte(`{}`))
		check(t, out, err, want{result: "xx"})
	}
}

// A descriptor _initialize opened is not in a snapshot, which holds memory
// and globals only: a program whose _initialize opens a file runs it at each
// call instead, and reads the file on every path.
func TestSnapshotInitOpens(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("opened at init"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, m := range startModes() {
		t.Run(m.name, func(t *testing.T) {
			rt := startRuntime(t, m.plain, nil)
			p := deployGrants(t, rt, m, "open", "init_open.wasm", &sandbox.Grants{Dirs: []sandbox.Dir{{Host: dir, Guest: "/d"}}})
			wantRefused(t, p, m, "changed what its instance holds outside its memory")
			for range 2 {
				out, err := rt.Call(context.Background(), "open", "read", []byte(`{}`))
				check(t, out, err, want{result: "opened at init"})
			}
		})
	}
}
