//go:build unix

package commands

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestReadImageFileFIFO: a pipe, as `berm deploy p <(cat f.wasm)` gives, is
// read to its end.
func TestReadImageFileFIFO(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	want := []byte("\x00asm\x01\x00\x00\x00")
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		f.Write(want)
		f.Close()
	}()
	got, err := readImageFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%q, %v; want %q", got, err, want)
	}
}
