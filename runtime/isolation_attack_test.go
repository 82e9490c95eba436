package runtime_test

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// Attacks on "no program can observe anything left by an earlier call"
// (ABI.md, One call) through what the pool's reset does not put back.

// cancelled is a context already done: a call under it runs its tool until
// the first deadline check (a tick of the countdown, or a host function),
// which traps.
func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// The deadline's countdown is a global that transform.Deadline adds after
// transform.Snapshot listed the mutable globals a reset sets back; kept by
// a pooled instance from call to call, where a call's first tick falls
// would tell it how many turns the calls before it counted, modulo the
// period (so Deadline exports it, and a reset sets it back). Here the
// caller reads it without timing: probe, run under a
// cancelled context, returns only if none of its 10,000 turns ticks, which
// holds in a new instance (16,384 to go) and fails after burn's 10,000.
// A program reads the same by timing its own turns: each tick is a host
// call and a yield of the goroutine.
func TestAttackDeadlineCountCarries(t *testing.T) {
	if plainEnv {
		t.Skip("the plain path has no countdown: wazero stops a cancelled call at once")
	}
	rt := poolRuntime(t, runtime.Config{})
	deployPoolFile(t, rt, "tick", "attack2_tick.wasm", nil)
	probe := func() error {
		_, err := rt.Call(cancelled(), "tick", "probe", []byte(`{}`))
		return err
	}
	// A cancelled call's instance is never reused: each probe of these
	// starts new.
	for range 3 {
		if err := probe(); err != nil {
			t.Fatalf("probe in a new instance: %v; want no tick within 10,000 turns", err)
		}
	}
	if _, err := rt.Call(context.Background(), "tick", "burn", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := probe(); err != nil {
		t.Errorf("probe after burn: %v; the countdown burn left reached the next call", err)
	}
}

// fsleak is a runtime with attack2_fs deployed as fsleak, granted a
// directory of one file at /data.
func fsleak(t *testing.T) *runtime.Runtime {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	rt := poolRuntime(t, runtime.Config{})
	deployPoolFile(t, rt, "fsleak", "attack2_fs.wasm",
		&sandbox.Grants{Dirs: []sandbox.Dir{{Host: dir, Guest: "/data"}}})
	return rt
}

// fsleakWord calls fsleak's tool, which answers a number: how many files it
// could open (count), or a WASI errno.
func fsleakWord(t *testing.T, rt *runtime.Runtime, tool string) uint32 {
	t.Helper()
	out, err := rt.Call(context.Background(), "fsleak", tool, []byte(`{}`))
	if err != nil || len(out.Result) != 4 {
		t.Fatalf("fsleak.%s: %q, %v", tool, out.Result, err)
	}
	return binary.LittleEndian.Uint32(out.Result)
}

// wazero opens a granted directory's preopen at its first use, whatever
// the WASI function and whether it succeeds, and the instance then holds
// it open: were a path_open that fails (ENOENT) not a change the pool
// watches, an instance in which a call touched the directory would be
// kept, holding one of the directory's sandbox.MaxOpenFiles. A later call
// counts what it can open: one fewer for each idle instance an earlier call
// left so. On the plain path every instance is closed after its call.
func TestAttackPreopenHeldByIdle(t *testing.T) {
	rt := fsleak(t)
	before := fsleakWord(t, rt, "count")
	// The nested touch runs in a second instance, which goes idle holding
	// the directory open; count then runs in the outer one.
	if _, err := rt.Call(context.Background(), "fsleak", "nest", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if after := fsleakWord(t, rt, "count"); after != before {
		t.Errorf("count: %d files, then %d after an earlier call touched the directory", before, after)
	}
}

// fd_readdir reads a directory's entries into its descriptor's cursor
// before it writes them to memory; when the write fails (EFAULT) the call
// fails, and were that not counted as a change, the next call in the
// instance would find the cursor where the failed read left it: reading
// from cookie 3 gives ENOENT in a directory descriptor nothing has read
// (the plain path, and a new instance) and succeeds in this one. A
// program can carry a number from call to call this way: the entries one
// read asks for, which the next finds by trying cookies (a probe that
// fails keeps the instance too).
func TestAttackReaddirCursorCarries(t *testing.T) {
	rt := fsleak(t)
	const enoent = 44
	if got := fsleakWord(t, rt, "readdir_probe"); got != enoent {
		t.Fatalf("readdir_probe of a directory nothing read: errno %d, want ENOENT (%d)", got, enoent)
	}
	if got := fsleakWord(t, rt, "readdir_probe"); got != enoent {
		t.Fatalf("readdir_probe again: errno %d, want ENOENT (%d)", got, enoent)
	}
	if _, err := rt.Call(context.Background(), "fsleak", "readdir_fault", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if got := fsleakWord(t, rt, "readdir_probe"); got != enoent {
		t.Errorf("readdir_probe after another call's failed read: errno %d, want ENOENT (%d): the cursor it left carried", got, enoent)
	}
}

// path_symlink names its descriptor third: given an old_path of 0, wazero
// opens the granted directory's preopen to check it is a directory, then
// fails (EINVAL), and an instance it ran in was kept, since the rule that
// marks a change read only a function's first parameter (here old_path,
// 0). A later call, from any MCP session, could then open one file fewer
// for each idle instance so left (1023, 1022, 1021).
func TestAttackSymlinkHoldsPreopen(t *testing.T) {
	t.Parallel()
	rt, _ := wasiFds(t, false)
	count := func() uint32 {
		out, err := rt.Call(context.Background(), "fds", "count", []byte(`{}`))
		if err != nil || len(out.Result) != 4 {
			t.Fatalf("fds.count: %q, %v", out.Result, err)
		}
		return binary.LittleEndian.Uint32(out.Result)
	}
	before := count()
	for i := range 3 {
		// path_symlink runs nested, in an instance of its own.
		if _, err := rt.Call(context.Background(), "fds", "nest", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if after := count(); after != before {
			t.Errorf("count: %d files, then %d after %d calls of path_symlink", before, after, i+1)
		}
	}
}
