package commands

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: what is written to slave is read from
// master, as a terminal shows it.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

// A terminal is a terminal; /dev/null, a character device too, is not, and
// neither is a pipe or a file.
func TestIsTerminal(t *testing.T) {
	t.Parallel()
	_, tty := openPTY(t)
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	file, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for _, tc := range []struct {
		name string
		w    io.Writer
		want bool
	}{
		{"pseudo-terminal", tty, true},
		{"pseudo-terminal behind stdout's writer", &outputWriter{w: tty}, true},
		{"/dev/null", null, false},
		{"pipe", w, false},
		{"file", file, false},
	} {
		if got := isTerminal(tc.w); got != tc.want {
			t.Errorf("isTerminal(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// berm run ends its result's line on a terminal, and leaves the result's
// bytes as they are anywhere else.
func TestRunResultOnTerminal(t *testing.T) {
	t.Parallel()
	master, tty := openPTY(t)
	root := t.TempDir()
	args := []string{"berm", "--root", root, "run", filepath.Join("..", "testdata", "echo.wasm"), "echo", `{"a":1}`}
	if code := Main(context.Background(), args, nil, tty, io.Discard); code != 0 {
		t.Fatalf("berm run exited %d", code)
	}
	got := make(chan string, 1)
	go func() {
		b := make([]byte, 64)
		n, _ := master.Read(b)
		got <- string(b[:n])
	}()
	select {
	case s := <-got:
		// The terminal shows a newline as \r\n.
		if s != `{"a":1}`+"\r\n" {
			t.Errorf("the terminal shows %q, want the result and a newline", s)
		}
	case <-time.After(time.Minute):
		t.Fatal("nothing reached the terminal")
	}

	out := filepath.Join(t.TempDir(), "out")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if code := Main(context.Background(), args, nil, f, io.Discard); code != 0 {
		t.Fatalf("berm run exited %d", code)
	}
	if b, _ := os.ReadFile(out); string(b) != `{"a":1}` {
		t.Errorf("berm run > file wrote %q, want the result's bytes exactly", b)
	}
}
