//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// openRoot opens the directory at the absolute path host as an os.Root
// without following a symbolic link in any element of the path: each is
// opened below the one before with O_NOFOLLOW, so a link swapped into the
// path (by a program with a read-write grant above it, say) is refused, not
// followed, whenever it is swapped in.
func openRoot(host string) (*os.Root, error) {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	for _, el := range strings.Split(strings.Trim(host, "/"), "/") {
		if el == "" {
			continue
		}
		next, err := unix.Openat(fd, el, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("%s is a symbolic link or not a directory: grant the directory it points to", el)
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: el, Err: err}
		}
		fd = next
	}
	defer unix.Close(fd)
	return os.OpenRoot(fmt.Sprintf("/proc/self/fd/%d", fd))
}

// pseudo reports whether f is on a file system of the kernel's own
// (/proc, /sys and their like), whose regular files are the host's memory,
// environment and settings: /proc/self/mem is berm's memory, and
// /proc/self/environ its token. A grant of / or of /proc reaches nothing
// there.
func pseudo(f *os.File) bool {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return true // unknown: refused
	}
	switch uint32(st.Type) {
	case unix.PROC_SUPER_MAGIC, unix.SYSFS_MAGIC, unix.DEBUGFS_MAGIC, unix.TRACEFS_MAGIC,
		unix.SECURITYFS_MAGIC, unix.CGROUP_SUPER_MAGIC, unix.CGROUP2_SUPER_MAGIC, unix.BPF_FS_MAGIC,
		unix.DEVPTS_SUPER_MAGIC, unix.EFIVARFS_MAGIC, unix.PSTOREFS_MAGIC:
		return true
	}
	return false
}

// readlink reads the link at name in root. The directory that holds it is
// opened first, through root, and the link read from that descriptor, so
// that what is checked is what is read: a link in a directory on a
// kernel's file system (pseudo) is refused, whichever path led there.
func readlink(root *os.Root, name string) (string, error) {
	dir, base := path.Split(name)
	if dir == "" {
		dir = "."
	}
	d, err := root.Open(dir)
	if err != nil {
		return "", err
	}
	defer d.Close()
	if pseudo(d) {
		return "", unix.EACCES
	}
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(int(d.Fd()), base, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}
