package commands

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/berm-dev/berm/runtime"
)

// TestReadImageFileBounded: a file whose size stat cannot tell (a device, a
// pipe) is read up to the image limit and no further.
func TestReadImageFileBounded(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	if _, err := readImageFile("/dev/zero"); !errors.Is(err, runtime.ErrRefused) {
		t.Fatalf("/dev/zero: %v, want %v", err, runtime.ErrRefused)
	}
}

func TestReadImageFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := filepath.Join(dir, "big.wasm")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, runtime.DefaultMaxImage+1); err != nil {
		t.Fatal(err)
	}
	if _, err := readImageFile(big); !errors.Is(err, runtime.ErrRefused) {
		t.Errorf("a file over the limit: %v", err)
	}
	if _, err := readImageFile(dir); err == nil {
		t.Errorf("a directory read as an image")
	}
	if _, err := readImageFile(filepath.Join(dir, "missing.wasm")); err == nil {
		t.Errorf("a missing file read as an image")
	}
}

// TestProjectFileBounded: berm.toml is read up to a bound, whatever it is.
func TestProjectFileBounded(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	dir := t.TempDir()
	if err := os.Symlink("/dev/zero", filepath.Join(dir, projectFile)); err != nil {
		t.Skip(err)
	}
	if _, err := readProject(dir); err == nil {
		t.Fatal("a berm.toml of /dev/zero read")
	}
}
