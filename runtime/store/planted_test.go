//go:build unix

package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berm-dev/berm/runtime/store"
)

// A file planted in the root that is no regular file, or larger than what
// the store writes there, is damaged: never opened (a FIFO would block),
// never read whole (/dev/zero would exhaust memory).
func TestPlantedFiles(t *testing.T) {
	s := open(t)
	digest, err := s.PutImage([]byte("\x00asm planted"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Deploy(store.Deployment{Name: "ok", Digest: digest}); err != nil {
		t.Fatal(err)
	}
	deployments := filepath.Join(s.Root(), "deployments")
	if err := syscall.Mkfifo(filepath.Join(deployments, "fifo.json"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(deployments, "zero.json")); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(deployments, "big.json")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 8<<30); err != nil { // sparse: no disk taken
		t.Fatal(err)
	}
	done := make(chan struct{})
	var list []store.Deployment
	var damaged []store.Damaged
	go func() {
		defer close(done)
		list, damaged, err = s.Deployments()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Deployments blocked on a planted file")
	}
	if err != nil || len(list) != 1 || list[0].Name != "ok" || len(damaged) != 3 {
		t.Fatalf("Deployments = %v, %v, %v; want ok and three damaged", list, damaged, err)
	}
	for _, d := range damaged {
		if !errors.Is(d.Err, store.ErrDamaged) {
			t.Errorf("%s: %v, want ErrDamaged", d.Name, d.Err)
		}
	}
	// An image replaced by a link to a device is damaged too.
	hexPart := strings.TrimPrefix(digest, "sha256:")
	path := filepath.Join(s.Root(), "images", "sha256", hexPart)
	os.Remove(path)
	if err := os.Symlink("/dev/zero", path); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Image(digest); !errors.Is(err, store.ErrDamaged) {
		t.Fatalf("Image of a link to /dev/zero = %v, want ErrDamaged", err)
	}
	// A data entry that is a FIFO fails the get instead of blocking it.
	if err := s.Set(t.Context(), "ok", []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(s.Root(), "data", "ok"))
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			p := filepath.Join(s.Root(), "data", "ok", e.Name())
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := make(chan error, 1)
	go func() { _, _, err := s.Get(t.Context(), "ok", []byte("k")); got <- err }()
	select {
	case err := <-got:
		if !errors.Is(err, store.ErrDamaged) {
			t.Fatalf("Get of a FIFO = %v, want ErrDamaged", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Get blocked on a FIFO")
	}
}
