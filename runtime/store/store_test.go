package store_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/store"
)

func open(t *testing.T) *store.Store {
	t.Helper()
	s, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestImages(t *testing.T) {
	s := open(t)
	image := []byte("\x00asm not really")
	digest, err := s.PutImage(image)
	if err != nil || digest != manifest.Digest(image) {
		t.Fatalf("PutImage = %s, %v", digest, err)
	}
	again, err := s.PutImage(image)
	if err != nil || again != digest {
		t.Fatalf("second PutImage = %s, %v", again, err)
	}
	files, _ := filepath.Glob(filepath.Join(s.Root(), "images", "sha256", "*"))
	if len(files) != 1 {
		t.Fatalf("the same bytes twice are stored as %v", files)
	}
	got, err := s.Image(digest)
	if err != nil || string(got) != string(image) {
		t.Fatalf("Image = %q, %v", got, err)
	}
	// Bytes that changed on disk are caught when read back, and a later
	// PutImage of the right bytes repairs the file.
	if err := os.WriteFile(files[0], []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Image(digest); !errors.Is(err, store.ErrDamaged) {
		t.Fatalf("tampered image: %v, want ErrDamaged", err)
	}
	if _, err := s.PutImage(image); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Image(digest); err != nil {
		t.Fatalf("repaired image: %v", err)
	}
	if _, err := s.Image("sha256:" + strings.Repeat("0", 64)); !errors.Is(err, store.ErrNoImage) {
		t.Fatalf("absent image: %v", err)
	}
	if _, err := s.Image("sha256:../../etc/passwd"); err == nil {
		t.Fatal("a malformed digest was accepted")
	}
}

func TestDeployments(t *testing.T) {
	s := open(t)
	digest, _ := s.PutImage([]byte("one"))
	if err := s.Deploy(store.Deployment{Name: "p", Digest: "sha256:" + strings.Repeat("a", 64)}); !errors.Is(err, store.ErrNoImage) {
		t.Fatalf("deploy without its image: %v", err)
	}
	if err := s.Deploy(store.Deployment{Name: "p", Digest: digest, Source: "one.wasm"}); err != nil {
		t.Fatal(err)
	}
	d, err := s.Deployment("p")
	if err != nil || d.Digest != digest || d.Source != "one.wasm" || d.Deployed.IsZero() {
		t.Fatalf("Deployment = %+v, %v", d, err)
	}
	if _, err := s.Deployment("q"); !errors.Is(err, store.ErrNotDeployed) {
		t.Fatalf("absent deployment: %v", err)
	}
	// A deployment file torn by hand is reported, not misread.
	if err := os.WriteFile(filepath.Join(s.Root(), "deployments", "torn.json"), []byte(`{"name":`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Deployment("torn"); !errors.Is(err, store.ErrDamaged) {
		t.Fatalf("torn deployment: %v", err)
	}
	// Temporary files of writes in progress (or killed) are never listed.
	if err := os.WriteFile(filepath.Join(s.Root(), "deployments", ".tmp-123"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(s.Root(), "deployments", "torn.json"))
	list, err := s.Deployments()
	if err != nil || len(list) != 1 || list[0].Name != "p" {
		t.Fatalf("Deployments = %+v, %v", list, err)
	}
	if err := s.Remove("p", false); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("p", false); !errors.Is(err, store.ErrNotDeployed) {
		t.Fatalf("second Remove: %v", err)
	}
}

// TestRacingDeployers has writers on many stores over one root (as separate
// processes would be) deploy and replace names while readers list: every
// read sees whole deployments only, and the last write of each name stands.
func TestRacingDeployers(t *testing.T) {
	root := t.TempDir()
	var digests []string
	for i := range 4 {
		s, _ := store.Open(root)
		d, err := s.PutImage([]byte(fmt.Sprintf("image %d", i)))
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := store.Open(root)
			if err != nil {
				errs <- err
				return
			}
			for i := range 50 {
				name := fmt.Sprintf("p%d", i%5)
				if err := s.Deploy(store.Deployment{Name: name, Digest: digests[(w+i)%4]}); err != nil {
					errs <- err
				}
				list, err := s.Deployments()
				if err != nil {
					errs <- err
				}
				for _, d := range list {
					if _, err := s.Image(d.Digest); err != nil {
						errs <- err
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s, _ := store.Open(root)
	list, _ := s.Deployments()
	if len(list) != 5 {
		t.Fatalf("%d deployments, want 5", len(list))
	}
	if tmp, _ := filepath.Glob(filepath.Join(root, "deployments", ".tmp-*")); len(tmp) > 0 {
		t.Fatalf("temporary files left: %v", tmp)
	}
}

func TestData(t *testing.T) {
	s := open(t)
	if _, ok, err := s.Get("p", []byte("k")); ok || err != nil {
		t.Fatalf("absent key: %v %v", ok, err)
	}
	if err := s.Set("p", []byte("k"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Set("p", []byte("k"), []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s.Get("p", []byte("k")); !ok || err != nil || string(v) != "v2" {
		t.Fatalf("Get = %q %v %v", v, ok, err)
	}
	if _, ok, _ := s.Get("q", []byte("k")); ok {
		t.Fatal("program q sees program p's data")
	}
	// Empty keys and values are keys and values like any other.
	if err := s.Set("p", nil, nil); err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := s.Get("p", nil); !ok || len(v) != 0 {
		t.Fatalf("empty key: %q %v", v, ok)
	}
	if err := s.Set("p", make([]byte, store.MaxKey+1), nil); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("long key: %v", err)
	}
	if err := s.Set("p", []byte("big"), make([]byte, store.MaxValue+1)); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("big value: %v", err)
	}
	if err := s.Delete("p", []byte("k")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("p", []byte("k")); err != nil {
		t.Fatalf("deleting an absent key: %v", err)
	}
	if _, ok, _ := s.Get("p", []byte("k")); ok {
		t.Fatal("deleted key still there")
	}
}

func TestDataQuota(t *testing.T) {
	s := open(t)
	value := make([]byte, store.MaxValue)
	n := store.MaxDataBytes / store.MaxValue
	for i := range n - 1 {
		if err := s.Set("p", []byte{byte(i)}, value); err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
	}
	// Replacing a value counts the new size, not both.
	if err := s.Set("p", []byte{0}, value); err != nil {
		t.Fatalf("replacing: %v", err)
	}
	if err := s.Set("p", []byte("one more"), value); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("past the quota: %v", err)
	}
}
