package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sync/atomic"
	"testing"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// endsAfter returns a context function, as Bind takes, whose context is
// done from its (n+1)th call on: each chunk a read or write moves asks it
// once, before it moves the chunk.
func endsAfter(n int) func() context.Context {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	return func() context.Context {
		calls++
		if calls > n {
			return done
		}
		return context.Background()
	}
}

// A file of a bound FS moves a Chunk of a read or write at a time and no
// more once its call is over: one chunk past it at most, where an fd_write
// of 1024 iovecs of 50 MiB moved 50 GiB. A write asked to move more after
// that gets EINTR, so that wazero's writev stops rather than go on to the
// next iovec. Unbound, a read or write moves all it is asked to.
func TestBindEndsReadsAndWrites(t *testing.T) {
	t.Parallel()
	const size = 3*Chunk + 5
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "big"), bytes.Repeat([]byte("x"), size), 0o644))
	f := mount(t, dir, true)
	buf := make([]byte, size)

	open := func(fs *FS, name string, flag experimentalsys.Oflag) experimentalsys.File {
		t.Helper()
		file, errno := fs.OpenFile(name, flag, 0o644)
		if errno != 0 {
			t.Fatalf("open %s: %v", name, errno)
		}
		t.Cleanup(func() { file.Close() })
		return file
	}
	for _, tc := range []struct {
		op   string
		move func(file experimentalsys.File) (int, experimentalsys.Errno)
		flag experimentalsys.Oflag
	}{
		{"read", func(file experimentalsys.File) (int, experimentalsys.Errno) { return file.Read(buf) }, experimentalsys.O_RDONLY},
		{"pread", func(file experimentalsys.File) (int, experimentalsys.Errno) { return file.Pread(buf, 1) }, experimentalsys.O_RDONLY},
		{"write", func(file experimentalsys.File) (int, experimentalsys.Errno) { return file.Write(buf) }, experimentalsys.O_RDWR},
		{"pwrite", func(file experimentalsys.File) (int, experimentalsys.Errno) { return file.Pwrite(buf, 1) }, experimentalsys.O_RDWR},
		{"append", func(file experimentalsys.File) (int, experimentalsys.Errno) { return file.Pwrite(buf, 0) },
			experimentalsys.O_RDWR | experimentalsys.O_APPEND},
	} {
		file := open(f.Bind(endsAfter(1)), "big", tc.flag)
		if n, errno := tc.move(file); n != Chunk || errno != 0 {
			t.Errorf("%s as the call ends: %d bytes, %v; want a chunk (%d)", tc.op, n, errno, Chunk)
		}
		if n, errno := tc.move(file); n != 0 || errno != experimentalsys.EINTR {
			t.Errorf("%s once the call is over: %d bytes, %v; want EINTR", tc.op, n, errno)
		}
		want := size
		if tc.op == "pread" {
			want = size - 1
		}
		if n, errno := tc.move(open(f, "big", tc.flag)); n != want || errno != 0 {
			t.Errorf("%s unbound: %d bytes, %v; want %d", tc.op, n, errno, want)
		}
	}
}

// A bound directory's Readdir reads a batch of entries at a time, and no
// more once its call is over: wazero asks for as many as the program's
// buffer could hold, millions, and each is a stat.
func TestBindEndsReaddir(t *testing.T) {
	t.Parallel()
	const entries = 2*readdirBatch + 10
	dir := t.TempDir()
	for i := range entries {
		must(t, os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), nil, 0o644))
	}
	f := mount(t, dir, false)
	for _, tc := range []struct {
		fs   *FS
		want int
	}{{f.Bind(endsAfter(1)), readdirBatch}, {f.Bind(endsAfter(1 << 20)), entries}, {f, entries}} {
		d, errno := tc.fs.OpenFile(".", experimentalsys.O_RDONLY, 0)
		if errno != 0 {
			t.Fatal(errno)
		}
		dirents, errno := d.Readdir(1 << 22)
		d.Close()
		if errno != 0 || len(dirents) != tc.want {
			t.Errorf("readdir: %d entries, %v; want %d", len(dirents), errno, tc.want)
		}
	}
}

// The directory itself, as wazero opens it at the first touch of a
// preopen, holds nothing of the host's until a read needs it: asking
// whether it is a directory, or its status, as fd_prestat_get and
// path_symlink do, leaves no descriptor open; with MaxOpenFiles open it
// still opens, and its first read is refused (EAGAIN), where wazero's
// preopen panicked at an open that failed so. Opened as path_open opens
// it, it counts as any file.
func TestTopHoldsNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644))
	f := mount(t, dir, true)
	top, errno := f.OpenFile(".", experimentalsys.O_RDONLY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	if isDir, errno := top.IsDir(); !isDir || errno != 0 {
		t.Fatalf("IsDir: %v, %v", isDir, errno)
	}
	if st, errno := top.Stat(); errno != 0 || !st.Mode.IsDir() {
		t.Fatalf("Stat: %v, %v", st.Mode, errno)
	}
	if _, errno := top.Ino(); errno != 0 {
		t.Fatal(errno)
	}
	if n := f.OpenFiles(); n != 0 {
		t.Errorf("%d files open after IsDir, Stat and Ino of the top", n)
	}
	dirents, errno := top.Readdir(-1)
	if errno != 0 || len(dirents) != 1 || dirents[0].Name != "f" {
		t.Fatalf("Readdir: %v, %v", dirents, errno)
	}
	if n := f.OpenFiles(); n != 1 {
		t.Errorf("%d files open after Readdir of the top, want 1", n)
	}
	top.Close()
	top.Close()
	if n := f.OpenFiles(); n != 0 {
		t.Errorf("%d files open after Close, want 0", n)
	}

	var open []experimentalsys.File
	defer func() {
		for _, o := range open {
			o.Close()
		}
	}()
	for range MaxOpenFiles {
		file, errno := f.OpenFile("f", experimentalsys.O_RDONLY, 0)
		if errno != 0 {
			t.Fatal(errno)
		}
		open = append(open, file)
	}
	if _, errno := f.OpenFile(".", experimentalsys.O_RDONLY, 0o600); errno != experimentalsys.EAGAIN {
		t.Errorf("the top opened as path_open does, with every file open: %v, want EAGAIN", errno)
	}
	top, errno = f.OpenFile(".", experimentalsys.O_RDONLY, 0)
	if errno != 0 {
		t.Fatalf("the top with every file open: %v", errno)
	}
	defer top.Close()
	if _, errno := top.Readdir(-1); errno != experimentalsys.EAGAIN {
		t.Errorf("Readdir of the top with every file open: %v, want EAGAIN", errno)
	}
}

// A bound file's sync ends with its call, with EINTR, and goes on to its
// end without it: fsync(2) takes as long as the disk needs, and nothing
// ends it (0.35 s after 0.5 GB was written, at a deadline of 200 ms). Here
// the sync waits at a gate the test opens only once Sync has returned; at
// most MaxSyncs run at once, and a call over while it waits for its turn
// gets EINTR too. Unbound, a sync waits to its end.
func TestBindEndsSync(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644))
	f := mount(t, dir, true)
	gate := make(chan struct{})
	var started, ended atomic.Int32
	f.fsync = func(osf *os.File) error {
		started.Add(1)
		<-gate
		ended.Add(1)
		return osf.Sync()
	}
	call, end := context.WithCancel(context.Background())
	bound := f.Bind(func() context.Context { return call })
	file, errno := bound.OpenFile("f", experimentalsys.O_RDWR, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer file.Close()

	results := make(chan experimentalsys.Errno, MaxSyncs+1)
	for range MaxSyncs + 1 {
		go func() { results <- file.Sync() }()
	}
	// Generous bounds, so that what is wrong fails rather than hangs.
	giveUp := time.After(10 * time.Second)
	for started.Load() < MaxSyncs {
		select {
		case <-giveUp:
			t.Fatalf("%d syncs started, want MaxSyncs (%d)", started.Load(), MaxSyncs)
		default:
			goruntime.Gosched()
		}
	}
	end() // the call is over: its deadline, say
	giveUp = time.After(10 * time.Second)
	for range MaxSyncs + 1 {
		select {
		case errno := <-results:
			if errno != experimentalsys.EINTR {
				t.Errorf("sync as the call ends: %v, want EINTR", errno)
			}
		case <-giveUp:
			close(gate)
			t.Fatalf("Sync waited for the sync past its call's end")
		}
	}
	if n := ended.Load(); n != 0 {
		t.Errorf("%d syncs ended before Sync returned, want none: it waited for them", n)
	}
	if n := started.Load(); n != MaxSyncs {
		t.Errorf("%d syncs started, want MaxSyncs (%d)", n, MaxSyncs)
	}
	close(gate)

	// Unbound, and bound to a call that is not over, a sync waits for its
	// end, its turn once the others have ended.
	unbound, errno := f.OpenFile("f", experimentalsys.O_RDWR, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer unbound.Close()
	if errno := unbound.Sync(); errno != 0 {
		t.Errorf("unbound sync: %v", errno)
	}
	live, errno := f.Bind(context.Background).OpenFile("f", experimentalsys.O_RDWR, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer live.Close()
	if errno := live.Datasync(); errno != 0 {
		t.Errorf("bound sync of a call not over: %v", errno)
	}
}
