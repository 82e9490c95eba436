package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// A grant nested two levels below a read-write one: the program swaps an
// element of the nested grant's path for a link out of every grant. The
// next Mount of the nested grant refuses it, rather than following the
// link to the outside (Mount once checked only the last element).
func TestMountRefusesLinkInPath(t *testing.T) {
	base := t.TempDir()
	rw, outside := filepath.Join(base, "rw"), filepath.Join(base, "outside")
	nested := filepath.Join(rw, "a", "b")
	must(t, os.MkdirAll(nested, 0o755))
	must(t, os.MkdirAll(filepath.Join(outside, "b"), 0o755))
	must(t, os.WriteFile(filepath.Join(outside, "b", "secret"), []byte("OUTSIDE"), 0o644))

	f, err := Mount(Dir{Host: rw, Guest: "/rw", Write: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// What the program can do itself, through its read-write grant, is
	// refused (a link with ..); the operator's own link is what the host
	// might hold, and must be refused all the same.
	if errno := f.Symlink("../outside", "a2"); errno != experimentalsys.EPERM {
		t.Errorf("symlink a2 -> ../outside: %v, want EPERM", errno)
	}
	must(t, os.Rename(filepath.Join(rw, "a"), filepath.Join(rw, "a_old")))
	must(t, os.Symlink(outside, filepath.Join(rw, "a")))

	_, err = Mount(Dir{Host: nested, Guest: "/b"})
	if !errors.Is(err, ErrGrant) || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("Mount through a link in the path = %v, want ErrGrant naming the link", err)
	}
	g := &Grants{Dirs: []Dir{{Host: nested, Guest: "/b"}}}
	if err := g.Check(); !errors.Is(err, ErrGrant) {
		t.Errorf("Check through a link in the path = %v, want ErrGrant", err)
	}
}

// A grant of / or of /proc reaches nothing of the kernel's file systems:
// /proc/self/environ is berm's environment (its token), /proc/self/mem its
// memory.
func TestProcFilesRefused(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	for _, d := range []Dir{{Host: "/", Guest: "/"}, {Host: "/proc", Guest: "/proc", Write: true}} {
		f, err := Mount(d)
		if err != nil {
			t.Fatal(err)
		}
		prefix := ""
		if d.Host == "/" {
			prefix = "proc/"
		}
		for _, name := range []string{"self/environ", "self/mem", "self/maps", "1/environ", "self/status"} {
			for _, flag := range []experimentalsys.Oflag{experimentalsys.O_RDONLY, experimentalsys.O_RDWR} {
				if flag == experimentalsys.O_RDWR && !d.Write {
					continue
				}
				file, errno := f.OpenFile(prefix+name, flag, 0)
				if errno == 0 {
					file.Close()
					t.Errorf("%s: opened %s%s (%v)", d.Host, prefix, name, flag)
				}
			}
		}
		f.Close()
	}
	// /sys too, and an ordinary file beside them still opens.
	f, err := Mount(Dir{Host: "/", Guest: "/"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if file, errno := f.OpenFile("sys/kernel/hostname", experimentalsys.O_RDONLY, 0); errno == 0 {
		file.Close()
		t.Error("opened /sys/kernel/hostname")
	}
	if file, errno := f.OpenFile("etc/hostname", experimentalsys.O_RDONLY, 0); errno != 0 && errno != experimentalsys.ENOENT {
		t.Errorf("etc/hostname: %v", errno)
	} else if errno == 0 {
		file.Close()
	}
}

// One grant holds at most MaxOpenFiles open at once: a call opening files
// without end gets EAGAIN, not every descriptor of the server; closing
// gives them back.
func TestOpenFilesBounded(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644))
	f, err := Mount(Dir{Host: dir, Guest: "/d"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var open []experimentalsys.File
	for range MaxOpenFiles {
		file, errno := f.OpenFile("f", experimentalsys.O_RDONLY, 0)
		if errno != 0 {
			t.Fatalf("open %d: %v", len(open), errno)
		}
		open = append(open, file)
	}
	if _, errno := f.OpenFile("f", experimentalsys.O_RDONLY, 0); errno != experimentalsys.EAGAIN {
		t.Errorf("open past the bound: %v, want EAGAIN", errno)
	}
	open[0].Close()
	open[0].Close() // twice gives back one
	file, errno := f.OpenFile("f", experimentalsys.O_RDONLY, 0)
	if errno != 0 {
		t.Fatalf("open after a close: %v", errno)
	}
	if _, errno := f.OpenFile("f", experimentalsys.O_RDONLY, 0); errno != experimentalsys.EAGAIN {
		t.Errorf("open past the bound after one close: %v, want EAGAIN", errno)
	}
	file.Close()
	for _, o := range open[1:] {
		o.Close()
	}
}

// A grant of / or of /proc reads no link of the kernel's file systems
// either: /proc/self/exe and /proc/self/cwd are the host's paths (berm's
// binary, its working directory), as the fds and root of every process
// are. A link elsewhere still reads.
func TestProcLinksRefused(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	t.Parallel()
	for _, d := range []Dir{{Host: "/", Guest: "/"}, {Host: "/proc", Guest: "/proc"}} {
		f, err := Mount(d)
		if err != nil {
			t.Fatal(err)
		}
		prefix := ""
		if d.Host == "/" {
			prefix = "proc/"
		}
		for _, name := range []string{"self/exe", "self/cwd", "self/root", "self/fd/0", "self", "thread-self", "1/exe", "self/task/" + itoa(uint32(os.Getpid())) + "/cwd"} {
			if target, errno := f.Readlink(prefix + name); errno != experimentalsys.EACCES {
				t.Errorf("%s: readlink %s%s = %q, %v; want EACCES", d.Host, prefix, name, target, errno)
			}
		}
		f.Close()
	}
	dir := t.TempDir()
	must(t, os.Symlink("target", filepath.Join(dir, "link")))
	must(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	must(t, os.Symlink("../target", filepath.Join(dir, "sub", "up")))
	f := mount(t, dir, false)
	for name, want := range map[string]string{"link": "target", "sub/up": "../target", "/sub/up": "../target"} {
		if target, errno := f.Readlink(name); errno != 0 || target != want {
			t.Errorf("readlink %s = %q, %v; want %q", name, target, errno, want)
		}
	}
	if _, errno := f.Readlink("sub"); errno != experimentalsys.EINVAL {
		t.Errorf("readlink of a directory: %v, want EINVAL", errno)
	}
	if _, errno := f.Readlink("missing/link"); errno != experimentalsys.ENOENT {
		t.Errorf("readlink under a missing directory: %v, want ENOENT", errno)
	}
}

// deepTree makes, under dir, levels directories each named by 250 a's
// (251 bytes of path a level), the last holding a file f, and returns the
// paths of the first n levels and of all of them. Made through os.Root,
// level by level: the whole path is past the host's own PATH_MAX.
func deepTree(t *testing.T, dir string, levels int) []string {
	t.Helper()
	name := strings.Repeat("a", 250)
	r, err := os.OpenRoot(dir)
	must(t, err)
	var paths []string
	for i := range levels {
		must(t, r.Mkdir(name, 0o755))
		next, err := r.OpenRoot(name)
		must(t, err)
		r.Close()
		r = next
		paths = append(paths, strings.Repeat(name+"/", i)+name)
	}
	f, err := r.Create("f")
	must(t, err)
	f.Close()
	r.Close()
	return paths
}

// A path longer than MaxPath fails with ENAMETOOLONG in every operation,
// as on Linux past PATH_MAX, however it got that long (wazero joins a
// path onto its directory descriptor's name, each within MaxPath): a
// descriptor 36 KB deep was walked again by every operation under it.
func TestPathTooLong(t *testing.T) {
	grant := t.TempDir()
	paths := deepTree(t, grant, 17)
	deep, near := paths[16], paths[15] // 4266 and 4015 bytes
	f := mount(t, grant, true)
	file := deep + "/f"
	stat := func(p string) experimentalsys.Errno { _, errno := f.Stat(p); return errno }
	for _, c := range []struct {
		op    string
		errno experimentalsys.Errno
	}{
		{"open", func() experimentalsys.Errno { _, errno := f.OpenFile(file, experimentalsys.O_RDONLY, 0); return errno }()},
		{"stat", stat(file)},
		{"lstat", func() experimentalsys.Errno { _, errno := f.Lstat(file); return errno }()},
		{"mkdir", f.Mkdir(deep+"/x", 0o755)},
		{"chmod", f.Chmod(file, 0o600)},
		{"rename from", f.Rename(file, "g")},
		{"rename to", f.Rename("file.txt", deep+"/g")},
		{"rmdir", f.Rmdir(deep)},
		{"unlink", f.Unlink(file)},
		{"link from", f.Link(file, "g")},
		{"link to", f.Link("file.txt", deep+"/g")},
		{"symlink", f.Symlink("f", deep+"/l")},
		{"readlink", func() experimentalsys.Errno { _, errno := f.Readlink(deep + "/l"); return errno }()},
		{"utimens", f.Utimens(file, experimentalsys.UTIME_OMIT, 1e9)},
	} {
		if c.errno != experimentalsys.ENAMETOOLONG {
			t.Errorf("%s of a path of %d bytes: %v, want ENAMETOOLONG", c.op, len(file), c.errno)
		}
	}
	if _, err := os.Stat(filepath.Join(grant, "g")); err == nil {
		t.Errorf("g was made")
	}
	// Within the bound, all is as before.
	if errno := f.Mkdir(near+"/x", 0o755); errno != 0 {
		t.Errorf("mkdir of a path of %d bytes: %v", len(near)+2, errno)
	}
	if errno := stat(near + "/x"); errno != 0 {
		t.Errorf("stat of a path of %d bytes: %v", len(near)+2, errno)
	}
}

// A directory renamed over another answers as rename(2) does, which
// os.Root does not (it never replaces a directory), and reaches nothing
// outside the grant through a link in either path.
func TestRenameOverDir(t *testing.T) {
	for _, c := range []struct {
		name, from, to string
		want           experimentalsys.Errno
		moved          bool // from is gone and to is what from was
	}{
		{"over empty", "d", "e", 0, true},
		{"slashes", "d/", "e/", 0, true},
		{"under a directory", "sub/d", "sub/e", 0, true},
		{"across directories", "d", "sub/e", 0, true},
		{"over full", "d", "full", experimentalsys.ENOTEMPTY, false},
		{"file over it", "file.txt", "e", experimentalsys.EISDIR, false},
		{"link over it", "inlink", "e", experimentalsys.EISDIR, false},
		{"link with a slash", "dlink/", "e", experimentalsys.ENOTDIR, false},
		{"over a link with a slash", "d", "elink/", experimentalsys.ENOTDIR, false},
		{"into itself", "d", "d/e", experimentalsys.EINVAL, false},
		{"the grant", ".", "e", experimentalsys.EIO, false}, // EBUSY, which WASI's errors lack
		{"through a link out", "d", "absdir/e", experimentalsys.EPERM, false},
		{"from through a link out", "absdir/e", "e", experimentalsys.EPERM, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			grant, outside := layout(t)
			for _, d := range []string{"d", "d/e", "e", "full", "sub/d", "sub/e", filepath.Join(outside, "e")} {
				if !filepath.IsAbs(d) {
					d = filepath.Join(grant, d)
				}
				must(t, os.Mkdir(d, 0o755))
			}
			write(t, filepath.Join(grant, "d", "mark"), "d")
			write(t, filepath.Join(grant, "sub", "d", "mark"), "d")
			write(t, filepath.Join(grant, "full", "x"), "")
			must(t, os.Symlink("d", filepath.Join(grant, "dlink")))
			must(t, os.Symlink("e", filepath.Join(grant, "elink")))
			f := mount(t, grant, true)
			if errno := f.Rename(c.from, c.to); errno != c.want {
				t.Fatalf("rename %s %s: %v, want %v", c.from, c.to, errno, c.want)
			}
			_, err := os.Lstat(filepath.Join(grant, strings.TrimRight(c.from, "/")))
			if gone := errors.Is(err, os.ErrNotExist); gone != c.moved {
				t.Errorf("%s gone: %v, want %v", c.from, gone, c.moved)
			}
			if c.moved {
				if _, err := os.Stat(filepath.Join(grant, c.to, "mark")); err != nil {
					t.Errorf("%s is not what %s was: %v", c.to, c.from, err)
				}
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 2 {
				t.Errorf("outside holds %d entries, want its own 2", len(entries))
			}
		})
	}
}
