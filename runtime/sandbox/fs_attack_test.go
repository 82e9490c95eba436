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
