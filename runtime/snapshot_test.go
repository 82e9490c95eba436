package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/host"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// The ways a program's calls can start: from the snapshot (the default),
// with _initialize at each call (the deployment's opt-out), and on the plain
// path (Config.Plain). Under BERM_PLAIN=1 the default is the plain path.
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
// path when plain (whatever BERM_PLAIN says).
func startRuntime(t testing.TB, plain bool, log func(ctx context.Context, program, tool string, line []byte), limits ...runtime.Limits) *runtime.Runtime {
	t.Helper()
	opts := &runtime.Config{
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
	opts.Syscalls = host.Syscalls(memoryKV{})
	ctx := context.Background()
	rt, err := runtime.New(ctx, *opts)
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
// at the first call with the snapshot, and read afresh for each call with the
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

// An _initialize that traps in the snapshot does not fail the deploy: it
// runs at each call instead, which fails as it always has, and
// Config.SnapshotRefused hears why, once; the program's log does not.
func TestSnapshotInitTraps(t *testing.T) {
	var l, refused logged
	rt := newRuntimeDepth(t, runtime.DefaultCallDepth, host.Syscalls(memoryKV{}), &runtime.Config{
		Imports:      []runtime.HostModule{host.WASI()},
		ModuleConfig: host.ModuleConfig(),
		Log:          l.log,
		SnapshotRefused: func(ctx context.Context, program, why string) {
			refused.log(ctx, program, "", []byte(why))
		},
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
	if notes := refused.take(); len(notes) != 1 || !strings.HasPrefix(notes[0], "bad-init.: _initialize trapped: ") || !strings.Contains(notes[0], "at each call instead, where it will likely trap again") {
		t.Errorf("refusals %q, want one on why _initialize runs at each call", notes)
	}
	if logs := l.take(); len(logs) != 0 {
		t.Errorf("the program's log %q, want nothing of berm's", logs)
	}
}

// berm.log during the snapshot's _initialize goes to the log, as the
// program's line under the tool "_initialize", at the first call: deploy
// runs no _initialize; the calls after it log nothing.
func TestSnapshotLogsInit(t *testing.T) {
	var l logged
	rt := startRuntime(t, false, l.log)
	deploy(t, rt, "init", "init.wasm")
	deployLogs := l.take()
	for range 3 {
		out, err := rt.Call(context.Background(), "init", "ready", []byte(`{}`))
		check(t, out, err, want{result: "ready"})
	}
	if os.Getenv("BERM_PLAIN") == "1" {
		return
	}
	if len(deployLogs) != 0 {
		t.Errorf("deploy logged %q, want nothing: the first call runs _initialize", deployLogs)
	}
	if logs := l.take(); len(logs) != 1 || logs[0] != "init._initialize: initializing" {
		t.Errorf("calls logged %q, want the line of _initialize once", logs)
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
	image, err := os.ReadFile(filepath.Join("internal", "transform", "testdata", "segments.wasm"))
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
	refused := p.Warm(context.Background())
	if m.each || m.plain || plainEnv {
		if refused != "" {
			t.Errorf("Warm refused %q, want nothing where no snapshot is asked for", refused)
		}
		return
	}
	if !strings.Contains(refused, why) || !strings.Contains(refused, "_initialize runs at each call instead") {
		t.Errorf("Warm refused %q, want it to say %q and what follows", refused, why)
	}
}

// An _initialize that takes longer than a snapshot may run (here
// 2 s by the clock, against the 1 s bound, under a call deadline of 30 s)
// is stopped there and runs at each call instead, which answers as with
// the opt-out. Before the bound, the snapshot waited for it (a spinning one
// held Prepare for the whole call deadline).
func TestSnapshotSlowInit(t *testing.T) {
	for _, m := range startModes() {
		t.Run(m.name, func(t *testing.T) {
			rt := startRuntime(t, m.plain, nil)
			p := deployGrants(t, rt, m, "slow", "init_slow.wasm", nil)
			wantRefused(t, p, m, "_initialize did not finish within 1s, the most a snapshot waits")
			out, err := rt.Call(context.Background(), "slow", "t", []byte(`{}`))
			check(t, out, err, want{result: "ready"})
		})
	}
}

// A call whose _initialize, run at its start, takes the whole deadline
// (2 s against 500 ms) says so, not that the tool ran past it.
func TestSnapshotInitPastDeadline(t *testing.T) {
	for _, m := range startModes() {
		t.Run(m.name, func(t *testing.T) {
			rt := startRuntime(t, m.plain, nil, runtime.Limits{Deadline: 500 * time.Millisecond})
			p := deployGrants(t, rt, m, "slow", "init_slow.wasm", nil)
			// The call's deadline cut the snapshot's run too, and the
			// refusal says so rather than blame the snapshot's own bound.
			wantRefused(t, p, m, "_initialize did not finish within 500ms, the call's deadline, shorter than the 1s a snapshot waits at most (give the call more time)")
			_, err := rt.Call(context.Background(), "slow", "t", []byte(`{}`))
			want := "slow.t: deadline exceeded: _initialize, which this program runs at the start of each call, ran past 500ms before the tool started"
			if !errors.Is(err, runtime.ErrDeadline) || err.Error() != want {
				t.Errorf("got %v, want %q", err, want)
			}
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
			wantRefused(t, p, m, "_initialize left more than 16 MiB of memory, the most a snapshot may hold")
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
			refused := p.Warm(context.Background())
			held, _ := runtime.ImageBytes(p)
			if !m.each && !m.plain && !plainEnv && (refused != "" || held < 1<<20) {
				t.Errorf("under 64 MiB: snapshot refused %q, image of %d bytes; want a snapshot of 1 MiB", refused, held)
			}
			if used := runtime.Budget(small); used != held {
				t.Errorf("budget used %d after the snapshot, want the image's %d", used, held)
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

// Prepare runs no _initialize: the snapshot waits for the program's first
// call (or Warm), so a program whose _initialize is slow (init_slow: 2 s
// by the clock, past the snapshot's 1 s) deploys at once and delays only
// its own first call, which answers as before, and calls that arrive
// while the snapshot runs wait for it and answer too; a program deployed
// beside it answers meanwhile.
func TestSnapshotLazy(t *testing.T) {
	rt := startRuntime(t, false, nil)
	ctx := context.Background()
	for _, name := range []string{"slow1", "slow2", "slow3"} {
		start := time.Now()
		deployLocal(t, rt, name, "init_slow.wasm")
		// The snapshot ran 1 s by the clock at Prepare before it was lazy.
		if took := time.Since(start); took >= time.Second {
			t.Errorf("deploy of %s took %s, want well under the snapshot's 1 s: Prepare ran _initialize", name, took)
		}
	}
	deployLocal(t, rt, "warm", "warm.wasm")

	slowDone := make(chan struct{})
	var wg sync.WaitGroup
	results := make([]string, 3)
	for i := range results {
		wg.Go(func() {
			out, err := rt.Call(ctx, "slow1", "t", []byte(`{}`))
			if err != nil {
				results[i] = err.Error()
				return
			}
			results[i] = string(out.Result)
		})
	}
	go func() { wg.Wait(); close(slowDone) }()
	out, err := rt.Call(ctx, "warm", "leak", []byte(`{}`))
	select {
	case <-slowDone:
		t.Errorf("warm answered only after slow1's first calls (3 s at least by the clock): it waited for their snapshot")
	default:
	}
	check(t, out, err, want{result: "clean"})
	<-slowDone
	for i, r := range results {
		if r != "ready" {
			t.Errorf("slow1's first call %d: %q, want ready", i, r)
		}
	}
}

// Warm answers what the first call found, however many ask at once, and a
// program closed before or while it runs leaves nothing held: no image, no
// pool, no budget.
func TestSnapshotWarmClosed(t *testing.T) {
	rt := startRuntime(t, false, nil, runtime.Limits{TotalMemory: 64 << 20})
	ctx := context.Background()
	image := localImage(t, "init_fill.wasm")

	p, err := rt.Prepare(ctx, "fill", image, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	refusals := make([]string, 4)
	for i := range refusals {
		wg.Go(func() { refusals[i] = p.Warm(ctx) })
	}
	wg.Wait()
	for i, r := range refusals {
		if r != "" {
			t.Errorf("Warm %d refused %q, want a snapshot", i, r)
		}
	}
	if held, _ := runtime.ImageBytes(p); !plainEnv && held < 1<<20 {
		t.Errorf("image of %d bytes after Warm, want the snapshot's 1 MiB", held)
	}
	p.Close()
	if used := runtime.Budget(rt); used != 0 {
		t.Errorf("budget used %d once the warmed program is closed, want 0", used)
	}

	p, err = rt.Prepare(ctx, "fill", image, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if r := p.Warm(ctx); r != "" {
		t.Errorf("Warm of a closed program refused %q, want nothing done", r)
	}
	if used := runtime.Budget(rt); used != 0 {
		t.Errorf("budget used %d after Warm of a closed program, want 0", used)
	}

	for range 5 {
		p, err = rt.Prepare(ctx, "fill", image, nil)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { p.Warm(ctx); close(done) }()
		p.Close()
		<-done
		if used := runtime.Budget(rt); used != 0 {
			t.Fatalf("budget used %d after Warm and Close at once, want 0", used)
		}
		if _, pooled := runtime.Reused(p); pooled && runtime.Idle(p) != 0 {
			t.Fatalf("a program closed while warming holds idle instances")
		}
	}
}

// A program's first call waits for its snapshot only within its own
// deadline, and the snapshot goes on without it for the calls after: here
// _initialize waits at a gate the test opens only once the first call (of
// 100 ms, under a runtime's deadline of 30 s) has returned, which it must
// do while the snapshot still waits there. It waited for the snapshot
// outside its deadline, for up to a second (the snapshot's bound): 0.2 s
// past a deadline of 200 ms at the first call over serve, at every call of
// berm run. So a program whose _initialize takes longer than a snapshot
// may run (init_slow's 2 s) now spends that second of its first call's
// deadline, where that call ran a second past it.
func TestSnapshotCallerDeadline(t *testing.T) {
	gate := make(chan struct{})
	var waited atomic.Int32 // the waits at the gate that ended
	opts := &runtime.Config{Imports: []runtime.HostModule{{Name: "gate", Export: func(b wazero.HostModuleBuilder) {
		b.NewFunctionBuilder().WithFunc(func(ctx context.Context) {
			select {
			case <-gate:
			case <-ctx.Done():
			}
			waited.Add(1)
		}).Export("wait")
	}}}}
	rt := newRuntimeDepth(t, runtime.DefaultCallDepth, nil, opts)
	p := deployLocal(t, rt, "gated", "call_init_gate.wasm")

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := rt.Call(ctx, "gated", "t", []byte(`{}`))
	n := waited.Load()
	cancel()
	if !errors.Is(err, runtime.ErrDeadline) {
		t.Fatalf("first call: %v, want ErrDeadline", err)
	}
	if plainEnv {
		return // no snapshot: the call's own _initialize met its deadline
	}
	if n != 0 {
		t.Errorf("the first call returned after the snapshot's wait at the gate ended: it waited past its own deadline")
	}
	if want := "_initialize, run once for the snapshot that calls start from, ran past 30s before the tool started; the snapshot goes on, for 1s at most, for the calls after"; !strings.Contains(err.Error(), want) {
		t.Errorf("first call: %v, want it to say %q", err, want)
	}
	close(gate)
	if refused := p.Warm(context.Background()); refused != "" {
		t.Errorf("the snapshot was refused (%q): the first call's deadline cut it", refused)
	}
	out, err := rt.Call(context.Background(), "gated", "t", []byte(`{}`))
	check(t, out, err, want{result: "ready"})
	if n := waited.Load(); n != 1 {
		t.Errorf("_initialize waited at the gate %d times, want once, for the snapshot", n)
	}
}
