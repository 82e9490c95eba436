//go:build unix

package sandbox

import (
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// A named pipe or a device in a grant is refused when opened: opening or
// reading one could block the call past its deadline.
func TestSpecialFiles(t *testing.T) {
	grant, _ := layout(t)
	must(t, syscall.Mkfifo(filepath.Join(grant, "fifo"), 0o644))
	f := mount(t, grant, true)
	done := make(chan experimentalsys.Errno)
	go func() {
		done <- openErrno(f, "fifo", experimentalsys.O_RDONLY)
	}()
	select {
	case errno := <-done:
		if errno != experimentalsys.EACCES {
			t.Errorf("open a named pipe: %v, want EACCES", errno)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("opening a named pipe blocked")
	}
	if errno := openErrno(f, "fifo", experimentalsys.O_WRONLY); errno != experimentalsys.EACCES && errno != experimentalsys.EIO {
		t.Errorf("open a named pipe to write: %v, want refused", errno)
	}
	if runtime.GOOS == "linux" {
		dev := mount(t, "/dev", false)
		if errno := openErrno(dev, "null", experimentalsys.O_RDONLY); errno != experimentalsys.EACCES {
			t.Errorf("open /dev/null: %v, want EACCES", errno)
		}
	}
}
