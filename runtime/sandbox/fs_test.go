package sandbox

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

const secret = "outside the grant"

// layout makes a directory to grant and, beside it, one that must stay out
// of reach, with links from the first to the second of every kind. It
// returns the two directories.
func layout(t *testing.T) (grant, outside string) {
	t.Helper()
	tmp := t.TempDir()
	grant, outside = filepath.Join(tmp, "grant"), filepath.Join(tmp, "outside")
	for _, d := range []string{grant, outside, filepath.Join(grant, "sub")} {
		must(t, os.Mkdir(d, 0o755))
	}
	write(t, filepath.Join(outside, "secret.txt"), secret)
	write(t, filepath.Join(grant, "file.txt"), "hello")
	write(t, filepath.Join(grant, "sub", "inner.txt"), "inner")
	for link, target := range map[string]string{
		"abs":       filepath.Join(outside, "secret.txt"), // absolute, out
		"absdir":    outside,                              // absolute, to a directory
		"rel":       "../outside/secret.txt",              // relative, out
		"reldir":    "..",                                 // the grant's parent
		"chain1":    "chain2",                             // chained: in, then out
		"chain2":    "sub/../chain3",
		"chain3":    "sub/../../outside/secret.txt",
		"sub/up":    "../../outside",            // from a subdirectory
		"root":      "/",                        // the host's root
		"procroot":  "/proc/self/root",          // the host's root, by /proc
		"proccwd":   "/proc/self/cwd",           // berm's working directory
		"inlink":    "file.txt",                 // within: followed
		"sub/inup":  "../file.txt",              // within, through ..
		"dangling":  "missing",                  // within, to nothing
		"loop":      "loop",                     // itself
		"sub/chain": "../chain1",                // within, then the chain out
		"sub/abs2":  "/" + filepath.Base(grant), // absolute to a name in the root
	} {
		must(t, os.Symlink(target, filepath.Join(grant, link)))
	}
	return grant, outside
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, name, content string) {
	t.Helper()
	must(t, os.WriteFile(name, []byte(content), 0o644))
}

func mount(t *testing.T, host string, writable bool) *FS {
	t.Helper()
	f, err := Mount(Dir{Host: host, Guest: "/data", Write: writable})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// readAll opens name in f and reads it whole.
func readAll(f *FS, name string) (string, experimentalsys.Errno) {
	file, errno := f.OpenFile(name, experimentalsys.O_RDONLY, 0)
	if errno != 0 {
		return "", errno
	}
	defer file.Close()
	var out []byte
	buf := make([]byte, 512)
	for {
		n, errno := file.Read(buf)
		out = append(out, buf[:n]...)
		if errno != 0 {
			return string(out), errno
		}
		if n == 0 {
			return string(out), 0
		}
	}
}

func TestMountRefuses(t *testing.T) {
	grant, outside := layout(t)
	tmp := filepath.Dir(grant)
	link := filepath.Join(tmp, "link")
	must(t, os.Symlink(grant, link))
	for name, host := range map[string]string{
		"missing":          filepath.Join(tmp, "missing"),
		"a file":           filepath.Join(outside, "secret.txt"),
		"a symbolic link":  link,
		"a relative path":  "grant",
		"a link in the fs": filepath.Join(grant, "absdir"),
	} {
		t.Run(name, func(t *testing.T) {
			f, err := Mount(Dir{Host: host, Guest: "/data"})
			if err == nil {
				f.Close()
				t.Fatalf("Mount(%s) succeeded", host)
			}
			if !errors.Is(err, ErrGrant) || !strings.Contains(err.Error(), host) {
				t.Errorf("Mount(%s) = %v, want ErrGrant naming the path", host, err)
			}
		})
	}
}

// A grant swapped for a link after deploy is refused when the program is
// next prepared; one swapped while mounted keeps showing the original.
func TestMountSwapped(t *testing.T) {
	grant, outside := layout(t)
	f := mount(t, grant, false)
	moved := grant + ".moved"
	must(t, os.Rename(grant, moved))
	must(t, os.Symlink(outside, grant))

	if got, errno := readAll(f, "file.txt"); errno != 0 || got != "hello" {
		t.Errorf("mounted before the swap: file.txt = %q, %v; want the original", got, errno)
	}
	if _, errno := readAll(f, "secret.txt"); errno != experimentalsys.ENOENT {
		t.Errorf("mounted before the swap: secret.txt: %v, want ENOENT", errno)
	}
	if f2, err := Mount(Dir{Host: grant, Guest: "/data"}); err == nil {
		f2.Close()
		t.Fatal("Mount of a grant swapped for a link succeeded")
	} else if !errors.Is(err, ErrGrant) || !strings.Contains(err.Error(), grant) {
		t.Errorf("Mount = %v, want ErrGrant naming %s", err, grant)
	}
}

// escapePaths are paths in a grant that lead, or would lead, out of it.
var escapePaths = []string{
	"..", "../outside/secret.txt", "sub/../../outside/secret.txt", "./../outside",
	"abs", "absdir", "absdir/secret.txt", "rel", "reldir", "reldir/outside/secret.txt",
	"chain1", "sub/chain", "sub/up", "sub/up/secret.txt", "root", "root/etc/passwd",
	"procroot", "procroot/etc/passwd", "proccwd", "sub/abs2",
}

func TestEscapesRefused(t *testing.T) {
	grant, _ := layout(t)
	for _, writable := range []bool{false, true} {
		f := mount(t, grant, writable)
		for _, name := range escapePaths {
			if got, errno := readAll(f, name); errno == 0 || strings.Contains(got, secret) {
				t.Errorf("write=%v: open %s = %q, %v; want refused", writable, name, got, errno)
			}
			if st, errno := f.Stat(name); errno == 0 {
				t.Errorf("write=%v: stat %s = %+v; want refused", writable, name, st)
			}
			if d, errno := f.OpenFile(name, experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0); errno == 0 {
				d.Close()
				t.Errorf("write=%v: opendir %s succeeded", writable, name)
			}
		}
	}
}

// Links within the grant are followed; O_NOFOLLOW does not follow them.
func TestLinksWithin(t *testing.T) {
	grant, _ := layout(t)
	f := mount(t, grant, false)
	for _, name := range []string{"inlink", "sub/inup", "sub/../inlink", "/file.txt"} {
		if got, errno := readAll(f, name); errno != 0 || got != "hello" {
			t.Errorf("open %s = %q, %v; want hello", name, got, errno)
		}
	}
	if _, errno := f.OpenFile("inlink", experimentalsys.O_RDONLY|experimentalsys.O_NOFOLLOW, 0); errno != experimentalsys.ELOOP {
		t.Errorf("open inlink O_NOFOLLOW: %v, want ELOOP", errno)
	}
	if _, errno := readAll(f, "loop"); errno != experimentalsys.ELOOP {
		t.Errorf("open loop: %v, want ELOOP", errno)
	}
	if _, errno := readAll(f, "dangling"); errno != experimentalsys.ENOENT {
		t.Errorf("open dangling: %v, want ENOENT", errno)
	}
	// Readlink shows a link's text, whatever it points at; Lstat the link.
	for link, want := range map[string]string{"abs": "", "rel": "../outside/secret.txt", "inlink": "file.txt"} {
		got, errno := f.Readlink(link)
		if errno != 0 || want != "" && got != want {
			t.Errorf("readlink %s = %q, %v; want %q", link, got, errno, want)
		}
		if st, errno := f.Lstat(link); errno != 0 || st.Mode&fs.ModeSymlink == 0 {
			t.Errorf("lstat %s = %v, %v; want a link", link, st.Mode, errno)
		}
	}
}

// A /proc granted whole still does not lead out: its magic links name
// absolute paths, which the root does not follow.
func TestProcGrant(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	f := mount(t, "/proc", false)
	for _, name := range []string{"self/root", "self/root/etc/passwd", "self/cwd", "self/cwd/fs_test.go",
		"thread-self/root/etc/passwd", "1/root", "self/exe", "self/fd/0", "self/fd/3"} {
		if got, errno := readAll(f, name); errno == 0 {
			t.Errorf("/proc granted: open %s succeeded (%d bytes)", name, len(got))
		}
	}
}

// Every operation that would change a read-only grant is refused, and
// nothing changes.
func TestReadOnly(t *testing.T) {
	grant, _ := layout(t)
	f := mount(t, grant, false)
	before := snapshot(t, grant)
	R := experimentalsys.EROFS
	for name, errno := range map[string]experimentalsys.Errno{
		"create":         openErrno(f, "new.txt", experimentalsys.O_RDWR|experimentalsys.O_CREAT),
		"create rdonly":  openErrno(f, "new.txt", experimentalsys.O_RDONLY|experimentalsys.O_CREAT),
		"truncate open":  openErrno(f, "file.txt", experimentalsys.O_RDONLY|experimentalsys.O_TRUNC),
		"open wronly":    openErrno(f, "file.txt", experimentalsys.O_WRONLY),
		"open rdwr":      openErrno(f, "file.txt", experimentalsys.O_RDWR),
		"open append":    openErrno(f, "file.txt", experimentalsys.O_APPEND),
		"mkdir":          f.Mkdir("newdir", 0o755),
		"rmdir":          f.Rmdir("sub"),
		"unlink":         f.Unlink("file.txt"),
		"unlink link":    f.Unlink("abs"),
		"rename":         f.Rename("file.txt", "moved.txt"),
		"chmod":          f.Chmod("file.txt", 0o777),
		"utimes":         f.Utimens("file.txt", 0, 0),
		"symlink":        f.Symlink("file.txt", "newlink"),
		"link":           f.Link("file.txt", "hardlink"),
		"link out":       f.Link("../outside/secret.txt", "hardlink"),
		"open dir write": openErrno(f, "sub", experimentalsys.O_RDWR|experimentalsys.O_DIRECTORY),
	} {
		want := R
		if name == "open dir write" {
			want = experimentalsys.EISDIR
		}
		if errno != want {
			t.Errorf("%s: %v, want %v", name, errno, want)
		}
	}
	file, errno := f.OpenFile("file.txt", experimentalsys.O_RDONLY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer file.Close()
	if _, errno := file.Write([]byte("x")); errno != experimentalsys.EBADF {
		t.Errorf("write: %v, want EBADF", errno)
	}
	if _, errno := file.Pwrite([]byte("x"), 0); errno != experimentalsys.EBADF {
		t.Errorf("pwrite: %v, want EBADF", errno)
	}
	if errno := file.Truncate(0); errno != experimentalsys.EBADF {
		t.Errorf("truncate: %v, want EBADF", errno)
	}
	if errno := file.Utimens(0, 0); errno != R {
		t.Errorf("futimens: %v, want EROFS", errno)
	}
	if errno := file.SetAppend(true); errno != 0 {
		t.Errorf("set append: %v", errno)
	}
	if _, errno := file.Write([]byte("x")); errno != experimentalsys.EBADF {
		t.Errorf("write in append mode: %v, want EBADF", errno)
	}
	dir, errno := f.OpenFile("sub", experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer dir.Close()
	if errno := dir.Utimens(0, 0); errno != R {
		t.Errorf("futimens on a directory: %v, want EROFS", errno)
	}
	if after := snapshot(t, grant); !slices.Equal(before, after) {
		t.Errorf("the read-only grant changed:\n%s\nbecame\n%s", strings.Join(before, "\n"), strings.Join(after, "\n"))
	}
}

func openErrno(f *FS, name string, flag experimentalsys.Oflag) experimentalsys.Errno {
	file, errno := f.OpenFile(name, flag, 0o644)
	if errno == 0 {
		file.Close()
	}
	return errno
}

// snapshot lists every entry under dir with its mode, size, times and
// content (or link text).
func snapshot(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		line := p + " " + fi.Mode().String() + " " + fi.ModTime().Format(time.RFC3339Nano)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			line += " " + string(b)
		}
		out = append(out, line)
		return nil
	})
	must(t, err)
	return out
}

// In a read-write grant a program cannot make a way out either: links it
// makes that lead out are refused, and one that leads out only once moved
// is still not followed out. Hard links out cannot be named.
func TestWritableNoWayOut(t *testing.T) {
	grant, outside := layout(t)
	f := mount(t, grant, true)
	for target, link := range map[string]string{
		"/etc/passwd":              "l1",
		outside + "/secret.txt":    "l2",
		"../outside/secret.txt":    "l3",
		"sub/../../outside":        "l4",
		"..":                       "l5",
		"../../outside":            "sub/l6",
		"/proc/self/root":          "l7",
		"":                         "l8",
		"/" + filepath.Base(grant): "l10",
	} {
		if errno := f.Symlink(target, link); errno != experimentalsys.EPERM {
			t.Errorf("symlink %s -> %q: %v, want EPERM", link, target, errno)
		}
	}
	// Made within, then moved up a level: it now points out, and is not
	// followed there.
	if errno := f.Symlink("../../outside/secret.txt", "sub/inner.lnk"); errno != experimentalsys.EPERM {
		t.Errorf("symlink sub/inner.lnk: %v, want EPERM", errno)
	}
	must(t, os.Mkdir(filepath.Join(grant, "sub", "deeper"), 0o755))
	if errno := f.Symlink("../../../outside/secret.txt", "sub/deeper/x"); errno != experimentalsys.EPERM {
		t.Errorf("symlink sub/deeper/x: %v, want EPERM", errno)
	}
	// A link that climbs is refused even when it stays within: moved up a
	// level, or reached through a link to ".", it would point out.
	if errno := f.Symlink("../x.txt", "sub/deeper/ok"); errno != experimentalsys.EPERM {
		t.Errorf("symlink sub/deeper/ok -> ../x.txt: %v, want EPERM", errno)
	}
	if errno := f.Symlink(".", "dot"); errno != 0 {
		t.Fatalf("symlink dot -> .: %v", errno)
	}
	if errno := f.Symlink("../outside/secret.txt", "dot/l2"); errno != experimentalsys.EPERM {
		t.Errorf("symlink dot/l2 -> ../outside/secret.txt: %v, want EPERM", errno)
	}
	if errno := f.Symlink("x.txt", "sub/deeper/ok"); errno != 0 {
		t.Errorf("symlink within, without ..: %v", errno)
	}
	for old, link := range map[string]string{
		"../outside/secret.txt":                   "h1",
		outside + "/secret.txt":                   "h2",
		"sub/../../outside/secret.txt":            "h3",
		"absdir/secret.txt":                       "h4",
		"procroot/" + outside[1:] + "/secret.txt": "h5",
		"file.txt":                  "../outside/h6",
		"file.txt/../../outside/h7": "h7",
	} {
		if errno := f.Link(old, link); errno == 0 {
			t.Errorf("link %s -> %s succeeded", link, old)
		}
	}
	// Linking a link out links the link itself, which is no more followed.
	if errno := f.Link("abs", "abs.hard"); errno != 0 {
		t.Fatal(errno)
	}
	if got, errno := readAll(f, "abs.hard"); errno == 0 {
		t.Errorf("hard link of a link out was followed: %q", got)
	}
	if got, err := os.ReadFile(filepath.Join(outside, "secret.txt")); err != nil || string(got) != secret {
		t.Errorf("outside changed: %q, %v", got, err)
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Errorf("outside has %d entries, want 1", len(entries))
	}
	// Writes through links out, and creations through them, are refused.
	for _, name := range []string{"abs", "rel", "chain1", "sub/up/new.txt", "absdir/new.txt", "procroot/tmp/new.txt"} {
		if errno := openErrno(f, name, experimentalsys.O_RDWR|experimentalsys.O_CREAT|experimentalsys.O_TRUNC); errno == 0 {
			t.Errorf("create %s succeeded", name)
		}
		if errno := f.Mkdir(name+".d", 0o755); errno == 0 && strings.Contains(name, "/") {
			t.Errorf("mkdir %s.d succeeded", name)
		}
		if errno := f.Chmod(name, 0o777); errno == 0 {
			t.Errorf("chmod %s succeeded", name)
		}
		if errno := f.Utimens(name, 0, 0); errno == 0 {
			t.Errorf("utimens %s succeeded", name)
		}
	}
	if errno := f.Rename("file.txt", "../outside/moved.txt"); errno == 0 {
		t.Error("rename out succeeded")
	}
	if errno := f.Rename("file.txt", "absdir/moved.txt"); errno == 0 {
		t.Error("rename through a link out succeeded")
	}
	if errno := f.Unlink("../outside/secret.txt"); errno == 0 {
		t.Error("unlink out succeeded")
	}
	if errno := f.Unlink("sub/up/secret.txt"); errno == 0 {
		t.Error("unlink through a link out succeeded")
	}
	if errno := f.Rmdir("absdir"); errno == 0 {
		t.Error("rmdir of a link out succeeded")
	}
	if got, err := os.ReadFile(filepath.Join(outside, "secret.txt")); err != nil || string(got) != secret {
		t.Errorf("outside changed: %q, %v", got, err)
	}
	fi, err := os.Stat(filepath.Join(outside, "secret.txt"))
	must(t, err)
	if fi.Mode().Perm() != 0o644 || fi.ModTime().Unix() == 0 {
		t.Errorf("outside changed: %v %v", fi.Mode(), fi.ModTime())
	}
}

// A read-write grant does what a directory does.
func TestWritable(t *testing.T) {
	grant, _ := layout(t)
	f := mount(t, grant, true)
	file, errno := f.OpenFile("new.txt", experimentalsys.O_RDWR|experimentalsys.O_CREAT|experimentalsys.O_EXCL, 0o644)
	if errno != 0 {
		t.Fatal(errno)
	}
	if _, errno := file.Write([]byte("hello, ")); errno != 0 {
		t.Fatal(errno)
	}
	if _, errno := file.Pwrite([]byte("H"), 0); errno != 0 {
		t.Fatal(errno)
	}
	// Append mode without reopening by host path: the file is renamed
	// first, and appending still works once it is back under its name.
	if errno := file.SetAppend(true); errno != 0 || !file.IsAppend() {
		t.Fatal(errno)
	}
	if _, errno := file.Seek(0, io.SeekStart); errno != 0 {
		t.Fatal(errno)
	}
	if _, errno := file.Write([]byte("world")); errno != 0 {
		t.Fatal(errno)
	}
	must(t, os.Rename(filepath.Join(grant, "new.txt"), filepath.Join(grant, "renamed.txt")))
	if errno := file.SetAppend(false); errno != experimentalsys.ENOENT {
		t.Errorf("SetAppend after a rename: %v, want ENOENT", errno)
	}
	if _, errno := file.Write([]byte("!")); errno != 0 {
		t.Fatal(errno)
	}
	if errno := file.Truncate(13); errno != 0 {
		t.Fatal(errno)
	}
	st, errno := file.Stat()
	if errno != 0 || st.Size != 13 {
		t.Errorf("stat = %+v, %v", st, errno)
	}
	if errno := file.Utimens(experimentalsys.UTIME_OMIT, 1e9); errno != experimentalsys.ENOENT {
		t.Errorf("futimens of a renamed file: %v, want ENOENT", errno)
	}
	file.Close()
	if got, _ := os.ReadFile(filepath.Join(grant, "renamed.txt")); string(got) != "Hello, world!" {
		t.Errorf("content %q", got)
	}
	for _, errno := range []experimentalsys.Errno{
		f.Mkdir("d", 0o755),
		f.Rename("renamed.txt", "d/f.txt"),
		f.Link("d/f.txt", "d/g.txt"),
		f.Symlink("f.txt", "d/h"),
		f.Chmod("d/f.txt", 0o600),
		f.Utimens("d/f.txt", experimentalsys.UTIME_OMIT, 2e9),
	} {
		if errno != 0 {
			t.Fatal(errno)
		}
	}
	if got, errno := readAll(f, "d/h"); errno != 0 || got != "Hello, world!" {
		t.Errorf("d/h = %q, %v", got, errno)
	}
	fi, err := os.Stat(filepath.Join(grant, "d", "f.txt"))
	must(t, err)
	if fi.Mode().Perm() != 0o600 || fi.ModTime().Unix() != 2 {
		t.Errorf("d/f.txt: %v %v", fi.Mode(), fi.ModTime())
	}
	dir, errno := f.OpenFile("d", experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	names := func() []string {
		dirents, errno := dir.Readdir(-1)
		if errno != 0 {
			t.Fatal(errno)
		}
		var out []string
		for _, d := range dirents {
			out = append(out, d.Name+":"+d.Type.String())
			if d.Ino == 0 {
				t.Errorf("%s: no inode", d.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	if got := names(); !slices.Equal(got, []string{"f.txt:----------", "g.txt:----------", "h:L---------"}) {
		t.Errorf("readdir = %v", got)
	}
	write(t, filepath.Join(grant, "d", "later"), "")
	if _, errno := dir.Seek(0, io.SeekStart); errno != 0 {
		t.Fatal(errno)
	}
	if got := names(); len(got) != 4 {
		t.Errorf("readdir after rewind = %v, want 4 entries", got)
	}
	if _, errno := dir.Seek(1, io.SeekStart); errno != experimentalsys.EISDIR {
		t.Errorf("seek a directory: %v, want EISDIR", errno)
	}
	dir.Close()
	for _, c := range []struct {
		errno, want experimentalsys.Errno
	}{
		{f.Rmdir("d"), experimentalsys.ENOTEMPTY},
		{f.Rmdir("d/f.txt"), experimentalsys.ENOTDIR},
		{f.Unlink("d"), experimentalsys.EISDIR},
		{f.Unlink("d/f.txt"), 0},
		{f.Unlink("d/g.txt"), 0},
		{f.Unlink("d/h"), 0},
		{f.Unlink("d/later"), 0},
		{f.Mkdir("e", 0o755), 0},
		{f.Rename("d", "e"), 0}, // an empty directory is replaced
		{f.Rmdir("e"), 0},
		{f.Mkdir("missing/x", 0o755), experimentalsys.ENOENT},
	} {
		if c.errno != c.want {
			t.Errorf("got %v, want %v", c.errno, c.want)
		}
	}
}

func TestFSString(t *testing.T) {
	grant, _ := layout(t)
	f := mount(t, grant, false)
	if s := f.String(); s != "/data" || strings.Contains(s, grant) {
		t.Errorf("String() = %q, want the guest path", s)
	}
}

// A grant closed under a running program: its files read on, new opens
// fail as a missing directory (wazero's lazy preopen panics on anything
// but ENOENT).
func TestClosed(t *testing.T) {
	grant, _ := layout(t)
	f, err := Mount(Dir{Host: grant, Guest: "/data"})
	must(t, err)
	file, errno := f.OpenFile("file.txt", experimentalsys.O_RDONLY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer file.Close()
	must(t, f.Close())
	if _, errno := f.OpenFile(".", experimentalsys.O_RDONLY, 0); errno != experimentalsys.ENOENT {
		t.Errorf("open after close: %v, want ENOENT", errno)
	}
	buf := make([]byte, 5)
	if n, errno := file.Read(buf); errno != 0 || !bytes.Equal(buf[:n], []byte("hello")) {
		t.Errorf("read after close = %q, %v", buf[:n], errno)
	}
}
