//go:build unix

package mcpserve_test

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berm-dev/berm/runtime"
)

// blockingPipe is a pipe in blocking mode, as a parent hands its child's
// stdin (os.Pipe's are non-blocking).
func blockingPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w = os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "stdin-w")
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	return flags&unix.O_NONBLOCK != 0
}

// TestStdioPipeModeRestored: stdin read through Go's poller is answered as
// before, and the pipe is left in blocking mode as it came, whether the
// client closes it or the server is stopped with stdin open.
func TestStdioPipeModeRestored(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	h.deploy(t, "echo", "echo.wasm")
	h.start(t)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo_echo","arguments":{"message":"hi"}}}` + "\n"

	t.Run("stdin closed", func(t *testing.T) {
		r, w := blockingPipe(t)
		go func() {
			io.WriteString(w, stdioInit+call)
			w.Close()
		}()
		got := replies(t, runStdio(t, h.srv, context.Background(), r, time.Second, nil))
		if m := got[`1`]; m.Result == nil || len(m.Result.Content) != 1 || m.Result.Content[0].Text != `{"message":"hi"}` {
			t.Errorf("echo_echo: %+v; replies %v", m, keys(got))
		}
		if nonblocking(t, r) {
			t.Error("stdin left non-blocking")
		}
	})
	t.Run("stopped with stdin open", func(t *testing.T) {
		r, w := blockingPipe(t)
		if _, err := io.WriteString(w, stdioInit+call); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		got := replies(t, runStdio(t, h.srv, ctx, r, time.Second, func() {
			time.Sleep(100 * time.Millisecond) // the call is read and answered
			cancel()
		}))
		if _, ok := got[`1`]; !ok {
			t.Errorf("no reply to the call; replies %v", keys(got))
		}
		if nonblocking(t, r) {
			t.Error("stdin left non-blocking")
		}
	})
}
