package store_test

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berm-dev/berm/runtime/store"
	"github.com/berm-dev/berm/runtime/store/storetest"
)

func open(t *testing.T) *store.Store {
	t.Helper()
	s, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSuite runs the suite that every store.State passes on a directory,
// then checks what only a directory can show: no temporary file left,
// nothing written beside the layout, and each program's data counted by
// DataUsage as the disk pays for it, so that what the suite checks of
// DataUsage holds of the disk.
func TestSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func() store.State {
		root := t.TempDir()
		t.Cleanup(func() { checkRoot(t, root) })
		return func() store.State {
			s, err := store.OpenDir(root)
			if err != nil {
				t.Fatal(err)
			}
			return filling{s}
		}
	})
}

// filling is a Store that fills a program's data in a fraction of the time
// that as many Sets take (storetest.Filler).
type filling struct{ *store.Store }

func (f filling) Fill(program string, n int) error { return fillKeys(f.Root(), program, n) }

// checkRoot checks a root once a case of the suite is done with it.
func checkRoot(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".tmp-") {
			t.Errorf("temporary file left: %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !slices.Contains([]string{"images", "deployments", "cache", "data"}, e.Name()) {
			t.Errorf("%s written in the root", e.Name())
		}
	}
	s, err := store.OpenDir(root) // a count of its own, from the disk
	if err != nil {
		t.Fatal(err)
	}
	programs, err := os.ReadDir(filepath.Join(root, "data"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range programs {
		bytes := usageOnDisk(t, root, p.Name())
		if got, err := s.DataUsage(p.Name()); err != nil || got != bytes {
			t.Errorf("DataUsage(%s) = %d, %v; %d bytes on disk", p.Name(), got, err, bytes)
		}
	}
}

// TestImageFiles: the same bytes are stored as one file, and bytes that
// changed on disk are caught when read back, until a PutImage of the right
// bytes repairs the file.
func TestImageFiles(t *testing.T) {
	s := open(t)
	image := []byte("\x00asm not really")
	digest, err := s.PutImage(image)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutImage(image); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(s.Root(), "images", "sha256", "*"))
	if len(files) != 1 || filepath.Base(files[0]) != strings.TrimPrefix(digest, "sha256:") {
		t.Fatalf("the same bytes twice are stored as %v", files)
	}
	if err := os.WriteFile(files[0], []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Image(digest); !errors.Is(err, store.ErrDamaged) {
		t.Fatalf("tampered image: %v, want ErrDamaged", err)
	}
	if _, err := s.PutImage(image); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Image(digest); err != nil || string(got) != string(image) {
		t.Fatalf("repaired image: %q, %v", got, err)
	}
}

// TestProgramNamesStayInRoot: a name that would lead out of the root as a
// file name reaches nothing there; storetest checks that each method
// refuses it.
func TestProgramNamesStayInRoot(t *testing.T) {
	root := t.TempDir()
	s, err := store.OpenDir(filepath.Join(root, "root"))
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := s.PutImage([]byte("one"))
	// What a name that escapes would reach: ROOT/../x.json and the like.
	leak := []byte(`{"name":"../x","digest":"` + digest + `"}`)
	if err := os.WriteFile(filepath.Join(root, "x.json"), leak, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"../x", "../../x", "..", "a/../../x", "/x"} {
		s.Deploy(store.Deployment{Name: name, Digest: digest})
		if d, err := s.Deployment(name); err == nil {
			t.Errorf("Deployment(%q) read %+v", name, d)
		}
		s.Set(t.Context(), name, []byte("k"), []byte("v"))
		s.Delete(t.Context(), name, []byte("k"))
		s.Remove(name, false)
	}
	if _, err := os.Stat(filepath.Join(root, "x.json")); err != nil {
		t.Errorf("a file outside the root was removed: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(root, "x")); len(entries) > 0 {
		t.Errorf("data written outside the root: %v", entries)
	}
	if entries, _ := os.ReadDir(filepath.Join(s.Root(), "deployments")); len(entries) > 0 {
		t.Errorf("deployments written under bad names: %v", entries)
	}
}

// TestDamagedDeployments: a damaged record costs only itself.
func TestDamagedDeployments(t *testing.T) {
	s := open(t)
	digest, _ := s.PutImage([]byte("one"))
	for _, name := range []string{"a", "b"} {
		if err := s.Deploy(store.Deployment{Name: name, Digest: digest}); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(s.Root(), "deployments")
	files := map[string]string{
		"torn.json":      `{"name":`,
		".tmp-123":       `{}`, // a write in progress, or killed: never listed
		".tmp-9.json":    `{}`,
		"zz.json":        "garbage\n",
		"other.json":     `{"name":"a","digest":"` + digest + `"}`, // another's name
		"baddigest.json": `{"name":"baddigest","digest":"sha256:../../x"}`,
		"Bad Name.json":  `{}`,
		".json":          `{}`,
		"notes.txt":      "not a record",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	list, damaged, err := s.Deployments()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range list {
		names = append(names, d.Name)
	}
	if strings.Join(names, " ") != "a b" {
		t.Errorf("deployments %v, want a b", names)
	}
	names = nil
	for _, d := range damaged {
		names = append(names, d.Name)
		if !errors.Is(d.Err, store.ErrDamaged) {
			t.Errorf("damaged %q: %v, want ErrDamaged", d.Name, d.Err)
		}
	}
	if got, want := strings.Join(names, ","), ",Bad Name,baddigest,other,torn,zz"; got != want {
		t.Errorf("damaged %q, want %q", got, want)
	}
	for _, name := range []string{"zz", "other", "baddigest", "torn"} {
		if _, err := s.Deployment(name); !errors.Is(err, store.ErrDamaged) {
			t.Errorf("Deployment(%q) = %v, want ErrDamaged", name, err)
		}
	}
	if err := s.Remove("zz", false); err != nil {
		t.Errorf("removing a damaged record: %v", err)
	}
}

// TestOpenDirExisting: a reading command leaves no root behind.
func TestOpenDirExisting(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	if _, err := store.OpenDirExisting(root); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenDirExisting of no root: %v, want fs.ErrNotExist", err)
	}
	if _, err := os.Stat(root); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenDirExisting created the root: %v", err)
	}
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := store.OpenDirExisting(root)
	if err != nil {
		t.Fatal(err)
	}
	list, damaged, err := s.Deployments()
	if err != nil || len(list) != 0 || len(damaged) != 0 {
		t.Fatalf("Deployments of an empty root = %v, %v, %v", list, damaged, err)
	}
	if _, err := s.Deployment("p"); !errors.Is(err, store.ErrNotDeployed) {
		t.Fatalf("Deployment: %v", err)
	}
	if _, _, err := s.Get(t.Context(), "p", []byte("k")); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if err := s.Delete(t.Context(), "p", []byte("k")); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Image("sha256:" + strings.Repeat("0", 64)); !errors.Is(err, store.ErrNoImage) {
		t.Fatalf("Image: %v", err)
	}
	if n, _, err := s.CollectTemp(0); n != 0 || err != nil {
		t.Fatalf("CollectTemp = %d, %v", n, err)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Fatalf("reading created %v", entries)
	}
	// Writing creates what it needs.
	digest, err := s.PutImage([]byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Deploy(store.Deployment{Name: "p", Digest: digest}); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(t.Context(), "p", []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if list, _, _ := s.Deployments(); len(list) != 1 {
		t.Fatalf("Deployments after a deploy: %v", list)
	}
	if _, err := store.OpenDirExisting(filepath.Join(root, "deployments", "p.json")); err == nil {
		t.Fatal("OpenDirExisting of a file")
	}
}

// TestCollectTemp: what killed writers left goes, a write in progress stays,
// and a program's temporary files count against its quota while they last.
func TestCollectTemp(t *testing.T) {
	s := open(t)
	old := time.Now().Add(-2 * time.Hour)
	write := func(path string, size int, mtime time.Time) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(s.Root(), "images", "sha256", ".tmp-1"), 100, old)
	write(filepath.Join(s.Root(), "deployments", ".tmp-2"), 10, old)
	write(filepath.Join(s.Root(), "deployments", ".tmp-young"), 10, time.Now())
	write(filepath.Join(s.Root(), "deployments", "old.txt"), 10, old) // not temporary
	// Nearly the whole quota in one killed write of program p.
	big := store.MaxDataBytes - 2*store.BlockSize
	write(filepath.Join(s.Root(), "data", "p", ".tmp-3"), big, old)
	write(filepath.Join(s.Root(), "data", "Bad", ".tmp-4"), 1, old) // no program's
	// What killed compiles leave in the cache: wazero's and the runtime's.
	key := strings.Repeat("ab", 32)
	write(filepath.Join(s.Root(), "cache", "wazero-v1", key+".123.tmp"), 20, old)
	write(filepath.Join(s.Root(), "cache", "wazero-v1", key), 30, old) // an entry
	write(filepath.Join(s.Root(), "cache", "repair-9", key), 40, old)
	if err := os.Chtimes(filepath.Join(s.Root(), "cache", "repair-9"), old, old); err != nil {
		t.Fatal(err)
	}
	// A program's data that a killed Remove had renamed away.
	write(filepath.Join(s.Root(), "data", ".tmp-removed-q-1", strings.Repeat("cd", 32)), 50, old)
	if err := os.Chtimes(filepath.Join(s.Root(), "data", ".tmp-removed-q-1"), old, old); err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 3*store.BlockSize)
	if err := s.Set(t.Context(), "p", []byte("k"), value); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("Set past a temporary file: %v, want ErrQuota", err)
	}
	files, bytes, err := s.CollectTemp(time.Hour)
	if err != nil || files != 6 || bytes != int64(100+10+big+20+50) {
		t.Fatalf("CollectTemp = %d, %d, %v; want 6, %d", files, bytes, err, 100+10+big+20+50)
	}
	for _, path := range []string{"cache/wazero-v1/" + key + ".123.tmp", "cache/repair-9", "data/.tmp-removed-q-1"} {
		if _, err := os.Stat(filepath.Join(s.Root(), path)); err == nil {
			t.Errorf("%s: not collected", path)
		}
	}
	for _, path := range []string{"deployments/.tmp-young", "deployments/old.txt", "data/Bad/.tmp-4", "cache/wazero-v1/" + key} {
		if _, err := os.Stat(filepath.Join(s.Root(), path)); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	if err := s.Set(t.Context(), "p", []byte("k"), value); err != nil {
		t.Fatalf("Set once collected: %v", err)
	}
	if files, _, err := s.CollectTemp(time.Hour); files != 0 || err != nil {
		t.Fatalf("second CollectTemp = %d, %v", files, err)
	}
}

// usageOnDisk is a program's data as the disk pays for it: each file of an
// entry rounded up to whole blocks, one at least.
func usageOnDisk(t *testing.T, root, program string) (bytes int64) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, "data", program))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue // the lock file; temporary files are errors of their own
		}
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		bytes += max(1, (info.Size()+store.BlockSize-1)/store.BlockSize) * store.BlockSize
	}
	return bytes
}

// fillKeys puts n small entries into program's directory, named as the
// store names entries, in a fraction of the time as many Sets would take:
// they are hard links of one file, which the store counts (and the disk
// pays for) as it would separate files. The lock file goes, so that every
// process counts the directory again however coarse its mtime.
func fillKeys(root, program string, n int) error {
	dir := filepath.Join(root, "data", program)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	prefix := rand.Uint64()
	name := func(i int) string { return filepath.Join(dir, fmt.Sprintf("%016x%048x", prefix, i)) }
	if err := os.WriteFile(name(0), []byte("\x04\x00\x00\x00fill"), 0o644); err != nil {
		return err
	}
	for i := 1; i < n; i++ {
		if err := os.Link(name(0), name(i)); err != nil {
			return err
		}
	}
	if err := os.Remove(filepath.Join(dir, ".lock")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// TestDataCountToken: what another process writes, this one's count of the
// program's data follows by the token in the lock file, even where the
// directory's mtime is too coarse to tell (as a file system whose clock
// ticks every few milliseconds may leave it).
func TestDataCountToken(t *testing.T) {
	root := t.TempDir()
	a, _ := store.OpenDir(root)
	b, _ := store.OpenDir(root)
	if err := b.Set(t.Context(), "p", []byte("small"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "data", "p")
	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Set(t.Context(), "p", []byte("big"), make([]byte, store.MaxValue)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(dir, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	want := int64(store.BlockSize + (4+3+store.MaxValue+store.BlockSize-1)/store.BlockSize*store.BlockSize)
	if got, err := b.DataUsage("p"); err != nil || got != want {
		t.Fatalf("b's DataUsage after a's write = %d, %v; want %d", got, err, want)
	}
	if err := a.Delete(t.Context(), "p", []byte("big")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(dir, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	if got, err := b.DataUsage("p"); err != nil || got != store.BlockSize {
		t.Fatalf("b's DataUsage after a's delete = %d, %v; want %d", got, err, store.BlockSize)
	}
}

// BenchmarkSet replaces a small value in a program's data that holds 10,000
// keys: what each berm.set of a busy program pays. Its two syncs (the file,
// the directory) are most of it where the count is kept.
func BenchmarkSet(b *testing.B) {
	s, err := store.OpenDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	if err := fillKeys(s.Root(), "p", 10_000); err != nil {
		b.Fatal(err)
	}
	if err := s.Set(b.Context(), "p", []byte("key 0"), []byte("value")); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := s.Set(b.Context(), "p", []byte("key 0"), []byte("another value")); err != nil {
			b.Fatal(err)
		}
	}
}
