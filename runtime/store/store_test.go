package store_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	list, damaged, err := s.Deployments()
	if err != nil || len(list) != 1 || list[0].Name != "p" || len(damaged) != 0 {
		t.Fatalf("Deployments = %+v, %+v, %v", list, damaged, err)
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
				list, damaged, err := s.Deployments()
				if err != nil {
					errs <- err
				}
				for _, d := range damaged {
					errs <- d.Err
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
	list, _, _ := s.Deployments()
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

// badNames are names that manifest.CheckProgramName refuses, some of which
// would lead out of the root were they used as file names.
var badNames = []string{"../x", "..%2Fx", "a/b", "", ".tmp-x", "Upper", strings.Repeat("a", 64), "..", "x\x00"}

// TestProgramNames: every method that takes a program name refuses one that
// is invalid, before it reaches the file system.
func TestProgramNames(t *testing.T) {
	root := t.TempDir()
	s, err := store.Open(filepath.Join(root, "root"))
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := s.PutImage([]byte("one"))
	// What a name that escapes would reach: ROOT/../x.json and the like.
	leak := []byte(`{"name":"../x","digest":"` + digest + `"}`)
	os.WriteFile(filepath.Join(root, "x.json"), leak, 0o644)
	os.MkdirAll(filepath.Join(root, "x"), 0o755)
	methods := map[string]func(name string) error{
		"Deploy": func(name string) error { return s.Deploy(store.Deployment{Name: name, Digest: digest}) },
		"Deployment": func(name string) error {
			_, err := s.Deployment(name)
			return err
		},
		"Remove": func(name string) error { return s.Remove(name, false) },
		"Get": func(name string) error {
			_, _, err := s.Get(name, []byte("k"))
			return err
		},
		"Set":    func(name string) error { return s.Set(name, []byte("k"), []byte("v")) },
		"Delete": func(name string) error { return s.Delete(name, []byte("k")) },
	}
	for method, f := range methods {
		for _, name := range badNames {
			if err := f(name); !errors.Is(err, manifest.ErrProgramName) {
				t.Errorf("%s(%q) = %v, want ErrProgramName", method, name, err)
			}
		}
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
	if got, want := strings.Join(names, ","), ",Bad Name,baddigest,other,zz"; got != want {
		t.Errorf("damaged %q, want %q", got, want)
	}
	for _, name := range []string{"zz", "other", "baddigest"} {
		if _, err := s.Deployment(name); !errors.Is(err, store.ErrDamaged) {
			t.Errorf("Deployment(%q) = %v, want ErrDamaged", name, err)
		}
	}
	if err := s.Remove("zz", false); err != nil {
		t.Errorf("removing a damaged record: %v", err)
	}
}

// TestOpenExisting: a reading command leaves no root behind.
func TestOpenExisting(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	if _, err := store.OpenExisting(root); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenExisting of no root: %v, want fs.ErrNotExist", err)
	}
	if _, err := os.Stat(root); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenExisting created the root: %v", err)
	}
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := store.OpenExisting(root)
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
	if _, _, err := s.Get("p", []byte("k")); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if err := s.Delete("p", []byte("k")); err != nil {
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
	if err := s.Set("p", []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if list, _, _ := s.Deployments(); len(list) != 1 {
		t.Fatalf("Deployments after a deploy: %v", list)
	}
	if _, err := store.OpenExisting(filepath.Join(root, "deployments", "p.json")); err == nil {
		t.Fatal("OpenExisting of a file")
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
	value := make([]byte, 3*store.BlockSize)
	if err := s.Set("p", []byte("k"), value); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("Set past a temporary file: %v, want ErrQuota", err)
	}
	files, bytes, err := s.CollectTemp(time.Hour)
	if err != nil || files != 5 || bytes != int64(100+10+big+20) {
		t.Fatalf("CollectTemp = %d, %d, %v; want 5, %d", files, bytes, err, 100+10+big+20)
	}
	for _, path := range []string{"cache/wazero-v1/" + key + ".123.tmp", "cache/repair-9"} {
		if _, err := os.Stat(filepath.Join(s.Root(), path)); err == nil {
			t.Errorf("%s: not collected", path)
		}
	}
	for _, path := range []string{"deployments/.tmp-young", "deployments/old.txt", "data/Bad/.tmp-4", "cache/wazero-v1/" + key} {
		if _, err := os.Stat(filepath.Join(s.Root(), path)); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	if err := s.Set("p", []byte("k"), value); err != nil {
		t.Fatalf("Set once collected: %v", err)
	}
	if files, _, err := s.CollectTemp(time.Hour); files != 0 || err != nil {
		t.Fatalf("second CollectTemp = %d, %v", files, err)
	}
}

// usageOnDisk is a program's data as the disk pays for it: each file
// rounded up to whole blocks, and the files that are entries.
func usageOnDisk(t *testing.T, s *store.Store, program string) (bytes int64, keys int) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(s.Root(), "data", program))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		bytes += max(1, (info.Size()+store.BlockSize-1)/store.BlockSize) * store.BlockSize
		keys++
	}
	return bytes, keys
}

// fillKeys puts n small entries of program p straight into its directory,
// named as the store names entries, in a fraction of the time as many Sets
// would take: they are hard links of one file, which the store counts (and
// the disk pays for) as it would separate files.
func fillKeys(t testing.TB, s *store.Store, n int) {
	t.Helper()
	dir := filepath.Join(s.Root(), "data", "p")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	first := filepath.Join(dir, fmt.Sprintf("%064x", 0))
	if err := os.WriteFile(first, []byte("\x01\x00\x00\x00kv"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < n; i++ {
		if err := os.Link(first, filepath.Join(dir, fmt.Sprintf("%064x", i))); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDataCharged: small entries are charged what the disk pays, a block
// each, and no more than MaxKeys of them fit.
func TestDataCharged(t *testing.T) {
	s := open(t)
	fillKeys(t, s, store.MaxKeys-1)
	if err := s.Set("p", []byte("last"), []byte("v")); err != nil {
		t.Fatalf("key %d: %v", store.MaxKeys, err)
	}
	err := s.Set("p", []byte("one more"), []byte("v"))
	if !errors.Is(err, store.ErrQuota) {
		t.Fatalf("key %d: %v, want ErrQuota", store.MaxKeys+1, err)
	}
	// The program reads the message: it names no path.
	if strings.Contains(err.Error(), "/") || strings.Contains(err.Error(), s.Root()) {
		t.Errorf("quota message with a path: %v", err)
	}
	// Replacing a key adds no key.
	if err := s.Set("p", []byte("last"), []byte("w")); err != nil {
		t.Fatalf("replacing: %v", err)
	}
	if err := s.Delete("p", []byte("last")); err != nil {
		t.Fatal(err)
	}
	if err := s.Set("p", []byte("one more"), []byte("v")); err != nil {
		t.Fatalf("after a delete: %v", err)
	}
	if bytes, keys := usageOnDisk(t, s, "p"); bytes > store.MaxDataBytes || keys > store.MaxKeys {
		t.Fatalf("%d bytes in %d keys", bytes, keys)
	}
}

// TestDataOverQuota: data over the quota (written before it counted
// blocks) takes no new key, but shrinks in place.
func TestDataOverQuota(t *testing.T) {
	s := open(t)
	if err := s.Set("p", []byte("mine"), make([]byte, 2*store.BlockSize)); err != nil {
		t.Fatal(err)
	}
	fillKeys(t, s, store.MaxKeys+10)
	s, err := store.Open(s.Root()) // another process, which counts it anew
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set("p", []byte("new"), nil); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("a new key: %v, want ErrQuota", err)
	}
	if err := s.Set("p", []byte("mine"), make([]byte, 3*store.BlockSize)); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("a larger value: %v, want ErrQuota", err)
	}
	if err := s.Set("p", []byte("mine"), []byte("v")); err != nil {
		t.Fatalf("a smaller value: %v", err)
	}
}

// racingSets has 16 goroutines, started at once, each set keysEach new keys
// of program p through stores in turn; it returns how many writes succeeded.
func racingSets(t *testing.T, stores []*store.Store, keysEach int, value []byte) int {
	t.Helper()
	var wg sync.WaitGroup
	var ok atomic.Int64
	start := make(chan struct{})
	for g := range 16 {
		s := stores[g%len(stores)]
		wg.Go(func() {
			<-start
			for i := range keysEach {
				err := s.Set("p", fmt.Appendf(nil, "%d-%d", g, i), value)
				switch {
				case err == nil:
					ok.Add(1)
				case !errors.Is(err, store.ErrQuota):
					t.Error(err)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return int(ok.Load())
}

// TestDataQuotaConcurrent: writers racing in one process, or in two (two
// Stores over one root), never pass the quota or MaxKeys together.
func TestDataQuotaConcurrent(t *testing.T) {
	value := make([]byte, 1<<20-100) // charged 1 MiB with its key
	fits := store.MaxDataBytes / (1 << 20)
	const left = 4 // values of 1 MiB that fit once the race starts
	for _, stores := range []int{1, 2, 16} {
		t.Run(fmt.Sprintf("bytes/%d stores", stores), func(t *testing.T) {
			root := t.TempDir()
			var ss []*store.Store
			for range stores {
				s, err := store.Open(root)
				if err != nil {
					t.Fatal(err)
				}
				ss = append(ss, s)
			}
			for i := range fits - left {
				if err := ss[0].Set("p", fmt.Appendf(nil, "%d", i), value); err != nil {
					t.Fatal(err)
				}
			}
			if n := racingSets(t, ss, 2, value); n != left {
				t.Errorf("%d values of 1 MiB set by racing writers, want %d", n, left)
			}
			if bytes, _ := usageOnDisk(t, ss[0], "p"); bytes > store.MaxDataBytes {
				t.Errorf("%d bytes on disk, over %d", bytes, store.MaxDataBytes)
			}
		})
		t.Run(fmt.Sprintf("keys/%d stores", stores), func(t *testing.T) {
			root := t.TempDir()
			var ss []*store.Store
			for range stores {
				s, err := store.Open(root)
				if err != nil {
					t.Fatal(err)
				}
				ss = append(ss, s)
			}
			fillKeys(t, ss[0], store.MaxKeys-20)
			if n := racingSets(t, ss, 4, []byte("v")); n != 20 {
				t.Errorf("%d keys set, want 20", n)
			}
			if _, keys := usageOnDisk(t, ss[0], "p"); keys > store.MaxKeys {
				t.Errorf("%d keys on disk, over %d", keys, store.MaxKeys)
			}
		})
	}
}

// TestDataTwoStores: what one process writes or removes, another's count of
// the program's data follows.
func TestDataTwoStores(t *testing.T) {
	root := t.TempDir()
	a, _ := store.Open(root)
	b, _ := store.Open(root)
	value := make([]byte, store.MaxValue)
	// b counts the data while it is small...
	if err := b.Set("p", []byte("small"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "data", "p")
	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	// ...then a fills it...
	for i := 0; ; i++ {
		err := a.Set("p", []byte{byte(i)}, value)
		if errors.Is(err, store.ErrQuota) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// ...and b sees it full, even where the directory's mtime is too
	// coarse to tell (as a file system whose clock ticks every few
	// milliseconds may leave it).
	if err := os.Chtimes(dir, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := b.Set("p", []byte("more"), value); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("b past a's writes: %v, want ErrQuota", err)
	}
	// a's deletes make room for b, and b's writes take it from a.
	for i := range 2 {
		if err := a.Delete("p", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Set("p", []byte("more"), value); err != nil {
		t.Fatalf("b after a's deletes: %v", err)
	}
	if err := b.Set("p", []byte("more still"), value); err != nil {
		t.Fatalf("b after a's deletes: %v", err)
	}
	if err := a.Set("p", []byte{0}, value); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("a past b's writes: %v, want ErrQuota", err)
	}
	// Removed by b, the data is empty to a.
	digest, _ := b.PutImage([]byte("one"))
	if err := b.Deploy(store.Deployment{Name: "p", Digest: digest}); err != nil {
		t.Fatal(err)
	}
	if err := b.Remove("p", false); err != nil {
		t.Fatal(err)
	}
	for i := range store.MaxDataBytes/store.MaxValue - 1 {
		if err := a.Set("p", []byte{byte(i)}, value); err != nil {
			t.Fatalf("a after b removed the data, value %d: %v", i, err)
		}
	}
}

// BenchmarkSet replaces a small value in a program's data that holds 10,000
// keys: what each berm.set of a busy program pays. Its two syncs (the file,
// the directory) are most of it where the count is kept.
func BenchmarkSet(b *testing.B) {
	s, err := store.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	fillKeys(b, s, 10_000)
	if err := s.Set("p", []byte("key 0"), []byte("value")); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := s.Set("p", []byte("key 0"), []byte("another value")); err != nil {
			b.Fatal(err)
		}
	}
}
