package runtime_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// wasiSlack is how far past its deadline a WASI call may end on a loaded
// machine: what each test below ran past it before was many times more.
const wasiSlack = 2 * time.Second

// logLines collects a runtime's log.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) log(_ context.Context, program, tool string, line []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, program+"."+tool+": "+string(line))
}

func (l *logLines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// flood is a runtime with the wasi_flood fixture deployed as flood, its
// log in logs, granted a read-write directory at /data (3), whose path it
// returns.
func flood(t *testing.T, deadline time.Duration, logs *logLines) (*runtime.Runtime, string) {
	t.Helper()
	dir := t.TempDir()
	rt := poolRuntime(t, runtime.Config{Limits: runtime.Limits{Deadline: deadline}, Log: logs.log})
	deployPoolFile(t, rt, "flood", "wasi_flood.wasm",
		&sandbox.Grants{Dirs: []sandbox.Dir{{Host: dir, Guest: "/data", Write: true}}})
	return rt, dir
}

// One WASI call that asks the host for seconds of work ends by its
// deadline: one fd_write of 10 (or 1024) iovecs over the same 50 MiB of
// newlines to stdout, which berm's log read byte by byte (8 s past a
// deadline of 200 ms; 1024 iovecs would take 14 minutes), and an fd_read
// or fd_pread of 1024 iovecs of 50 MiB from a sparse file of a granted
// directory (83 s past). What stdout wrote past what the log reads is
// counted in the log's last line.
func TestWASIDeadlineOneCall(t *testing.T) {
	t.Parallel()
	const deadline = 200 * time.Millisecond
	for _, tool := range []string{"stdout", "stdout_max", "file_read", "file_pread"} {
		t.Run(tool, func(t *testing.T) {
			t.Parallel()
			var logs logLines
			rt, _ := flood(t, deadline, &logs)
			start := time.Now()
			out, err := rt.Call(context.Background(), "flood", tool, []byte(`{}`))
			took := time.Since(start)
			if err != nil && !errors.Is(err, runtime.ErrDeadline) {
				t.Fatalf("%s: %v", tool, err)
			}
			if took > deadline+wasiSlack {
				t.Errorf("%s: ended %v past its deadline", tool, took-deadline)
			}
			t.Logf("%s: ended %v past its deadline (result %x, %v)", tool, took-deadline, out.Result, err)
			if strings.HasPrefix(tool, "stdout") && err == nil {
				lines := logs.all()
				if len(lines) == 0 || !strings.Contains(lines[len(lines)-1], "bytes of stdout and stderr dropped unread") {
					t.Errorf("%s: the log ends %q, want the bytes dropped unread", tool, lines)
				}
			}
		})
	}
}

// One fd_write or fd_pwrite of 10 iovecs of 50 MiB to a file of a granted
// directory, ended (here canceled) once the file holds a megabyte, ends
// before it wrote them all: it wrote all 500 MiB whatever happened, 0.75
// to 1.15 s past a deadline of 200 ms.
func TestWASIFileWriteEnds(t *testing.T) {
	t.Parallel()
	const total = 10 * 50 << 20
	for _, tool := range []string{"file_write", "file_pwrite"} {
		t.Run(tool, func(t *testing.T) {
			t.Parallel()
			var logs logLines
			rt, dir := flood(t, time.Minute, &logs)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := rt.Call(ctx, "flood", tool, []byte(`{}`))
				done <- err
			}()
			var err error
		wait:
			for {
				select {
				case err = <-done:
					break wait
				case <-time.After(time.Millisecond):
					if fi, err := os.Stat(filepath.Join(dir, "out")); err == nil && fi.Size() >= 1<<20 {
						cancel()
					}
				}
			}
			cancel()
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%s: %v, want canceled", tool, err)
			}
			fi, err := os.Stat(filepath.Join(dir, "out"))
			if err != nil {
				t.Fatal(err)
			}
			// The poll above may come late on a loaded machine, so all that
			// is asked is that the write ended before its end.
			if fi.Size() >= total {
				t.Errorf("%s: wrote %d MiB of %d, canceled at 1 MiB", tool, fi.Size()>>20, total>>20)
			}
			t.Logf("%s: wrote %d MiB of %d, canceled at 1 MiB", tool, fi.Size()>>20, total>>20)
		})
	}
}
