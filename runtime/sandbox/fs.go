package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
)

// FS is one granted directory as wazero's experimental sys.FS, for
// wazero's sysfs.FSConfig WithSysFSMount. Every path it is given is resolved
// by an os.Root opened on the directory, never joined onto the host path, so
// that neither "..", nor a symbolic link (absolute, relative, chained, or
// made by the program), nor a hard link the program makes, reaches outside
// it. Without Dir.Write every operation that would change the directory
// fails with EROFS.
//
// An FS is safe for concurrent use by any number of instances; the files it
// opens belong to the instance that opened them. Each instance should see
// it through Bind, so that its reads and writes end with the instance's call.
type FS struct {
	experimentalsys.UnimplementedFS
	root  *os.Root
	guest string
	write bool
	// open counts the files open through the FS and every FS bound from
	// it: MaxOpenFiles at most.
	open *atomic.Int64
	// syncs holds a token for each sync of a file running (file.Sync),
	// through the FS and every FS bound from it: MaxSyncs at most.
	syncs chan struct{}
	// fsync is fsync(2) of a file; a test's may take its time.
	fsync func(*os.File) error
	// ctx returns the context of the call running in the instance the FS
	// is bound to; nil when it is not bound.
	ctx func() context.Context
}

var _ experimentalsys.FS = (*FS)(nil)

// Mount opens d's host directory. It refuses, wrapping ErrGrant and naming
// the path, a directory that is missing, a symbolic link (a grant whose
// directory was swapped for a link after deploy), or not the directory the
// path named when it was opened. The FS keeps a descriptor of the directory:
// swapping it once mounted changes nothing the program sees.
func Mount(d Dir) (*FS, error) {
	if !filepath.IsAbs(d.Host) {
		return nil, fmt.Errorf("%w: directory %s: the host path is not absolute", ErrGrant, d.Host)
	}
	root, err := openRoot(d.Host)
	if err != nil {
		return nil, fmt.Errorf("%w: directory %s: %w", ErrGrant, d.Host, pathErr(err))
	}
	refuse := func(why error) (*FS, error) {
		root.Close()
		return nil, fmt.Errorf("%w: directory %s: %w", ErrGrant, d.Host, why)
	}
	// openRoot followed no link; the path must still name what it opened.
	named, err := os.Lstat(d.Host)
	if err != nil {
		return refuse(pathErr(err))
	}
	if named.Mode()&fs.ModeSymlink != 0 {
		return refuse(errors.New("is a symbolic link"))
	}
	opened, err := root.Stat(".")
	if err != nil {
		return refuse(pathErr(err))
	}
	if !os.SameFile(named, opened) {
		return refuse(errors.New("was replaced while it was opened"))
	}
	return &FS{root: root, guest: d.Guest, write: d.Write, open: new(atomic.Int64),
		syncs: make(chan struct{}, MaxSyncs), fsync: (*os.File).Sync}, nil
}

// Bind returns f as one instance sees it, ctx returning the context of the
// call the instance runs (instances are reused, so it changes from call to
// call). A read or write through a file it opens moves at most Chunk bytes
// at a time, and nothing more once that context is done: one fd_write of
// 1024 iovecs of 50 MiB, or an fd_read of as many from a sparse file,
// would otherwise hold the host for a minute past the call's deadline.
// The files it opens count against f's MaxOpenFiles; closing f closes
// what they share.
func (f *FS) Bind(ctx func() context.Context) *FS {
	g := *f
	g.ctx = ctx
	return &g
}

// OpenFiles reports how many files are open through f and the FSes bound
// from it.
func (f *FS) OpenFiles() int { return int(f.open.Load()) }

// pathErr drops the path an os error repeats.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Close closes the directory. Files already open stay usable until closed.
func (f *FS) Close() error { return f.root.Close() }

// String names the directory as the program sees it: wazero may print it in
// errors a program sees, which must not show the host's paths.
func (f *FS) String() string { return f.guest }

// MaxPath bounds the length in bytes of a path an operation resolves, as
// wazero hands it over: Linux's PATH_MAX. A program's own path is bounded
// so before wazero sees it (runtime.MaxPath), but wazero joins it onto the
// name of the directory descriptor it is relative to, which can be as
// long: a descriptor opened nine times 2000 levels down carried a name of
// 36 KB, walked again by every operation under it. Past it an operation
// fails with ENAMETOOLONG, as Linux fails a path past PATH_MAX.
//
// So one operation resolves at most two paths of MaxPath bytes, at most
// 2048 elements each, and os.Root follows at most 8 links in each.
const MaxPath = 4096

// tooLong reports whether any of paths is longer than MaxPath.
func tooLong(paths ...string) bool {
	for _, p := range paths {
		if len(p) > MaxPath {
			return true
		}
	}
	return false
}

// rel turns a path wazero hands over into one relative to the root: wazero
// joins a path under a directory opened at the root as "/name".
func rel(p string) string {
	p = strings.TrimLeft(p, "/")
	if p == "" {
		return "."
	}
	return p
}

// errnoOf maps an error of os.Root or os.File to the Errno a program sees.
func errnoOf(err error) experimentalsys.Errno {
	if err == nil {
		return 0
	}
	var se syscall.Errno
	if errors.As(err, &se) {
		return experimentalsys.UnwrapOSError(se)
	}
	switch {
	case errors.Is(err, fs.ErrClosed):
		return experimentalsys.EBADF
	case errors.Is(err, fs.ErrNotExist):
		return experimentalsys.ENOENT
	case errors.Is(err, fs.ErrExist):
		return experimentalsys.EEXIST
	case errors.Is(err, fs.ErrPermission):
		return experimentalsys.EPERM
	case errors.Is(err, fs.ErrInvalid):
		return experimentalsys.EINVAL
	}
	// What os.Root refuses by itself ("path escapes from parent": a ".." or
	// a link that leaves the root) is a path outside the grant.
	return experimentalsys.EPERM
}

// mutates reports whether opening with flag could change the directory.
func mutates(flag experimentalsys.Oflag) bool {
	return flag&(experimentalsys.O_RDWR|experimentalsys.O_WRONLY|experimentalsys.O_CREAT|
		experimentalsys.O_TRUNC|experimentalsys.O_APPEND) != 0
}

func osFlag(flag experimentalsys.Oflag) int {
	var o int
	switch flag & (experimentalsys.O_RDONLY | experimentalsys.O_RDWR | experimentalsys.O_WRONLY) {
	case experimentalsys.O_RDWR:
		o = os.O_RDWR
	case experimentalsys.O_WRONLY:
		o = os.O_WRONLY
	default:
		o = os.O_RDONLY
	}
	for _, b := range []struct {
		w  experimentalsys.Oflag
		os int
	}{
		{experimentalsys.O_APPEND, os.O_APPEND},
		{experimentalsys.O_CREAT, os.O_CREATE},
		{experimentalsys.O_EXCL, os.O_EXCL},
		{experimentalsys.O_SYNC | experimentalsys.O_DSYNC, os.O_SYNC},
		{experimentalsys.O_TRUNC, os.O_TRUNC},
		{experimentalsys.O_DIRECTORY, oDirectory},
	} {
		if flag&b.w != 0 {
			o |= b.os
		}
	}
	return o
}

// OpenFile implements sys.FS. A link is followed only within the root (by
// os.Root); with O_NOFOLLOW a link is not opened at all (ELOOP).
func (f *FS) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	if tooLong(p) {
		return nil, experimentalsys.ENAMETOOLONG
	}
	name := rel(p)
	if !f.write && mutates(flag) {
		if flag&experimentalsys.O_DIRECTORY != 0 {
			return nil, experimentalsys.EISDIR // as wazero's ReadFS
		}
		return nil, experimentalsys.EROFS
	}
	if flag&experimentalsys.O_NOFOLLOW != 0 && flag&(experimentalsys.O_CREAT|experimentalsys.O_EXCL) != experimentalsys.O_CREAT|experimentalsys.O_EXCL {
		// os.Root follows a link in the last element whatever the flags
		// say. A link put in its place between this check and the open is
		// still followed only within the root.
		if fi, err := f.root.Lstat(name); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if flag&experimentalsys.O_DIRECTORY != 0 {
				return nil, experimentalsys.ENOTDIR
			}
			return nil, experimentalsys.ELOOP
		}
	}
	if name == "." && flag == experimentalsys.O_RDONLY && perm == 0 {
		return f.top(flag)
	}
	file := &file{fs: f, name: name, flag: flag, append: flag&experimentalsys.O_APPEND != 0}
	if errno := file.openOS(perm); errno != 0 {
		return nil, errno
	}
	return file, 0
}

// top is the directory itself as wazero opens it at the first touch of a
// preopen (to read, with no permissions, where path_open asks for 0600):
// Go's and wasi-libc's initialization, and path_symlink or fd_prestat_get
// given the preopen, only ask whether it is a directory, or its status. So
// it is opened from the host at its first use that needs it (file.load),
// and until then holds nothing of the host's, nor one of MaxOpenFiles: an
// instance that only touched its preopen holds no descriptor when it goes
// idle, and a full bound refuses a read of the directory (EAGAIN) rather
// than make wazero's preopen panic. A program's own path_open of "." is
// opened and counted as any other, so that it cannot make descriptors
// without end.
func (f *FS) top(flag experimentalsys.Oflag) (experimentalsys.File, experimentalsys.Errno) {
	fi, err := f.root.Stat(".")
	if err != nil {
		if errors.Is(err, fs.ErrClosed) {
			// The grant is closed under a running program: its directory
			// is gone (wazero's lazy preopen expects ENOENT, not EBADF).
			return nil, experimentalsys.ENOENT
		}
		return nil, errnoOf(err)
	}
	st := sys.NewStat_t(fi)
	return &file{fs: f, name: ".", flag: flag, stat: &fileStat{dev: st.Dev, ino: st.Ino, isDir: true}}, 0
}

// openOS opens f's file from the host: what OpenFile opens, and what load
// opens of the directory itself.
func (f *file) openOS(perm fs.FileMode) experimentalsys.Errno {
	osf, err := f.fs.root.OpenFile(f.name, osFlag(f.flag)|oNonblock, perm&fs.ModePerm)
	if err != nil {
		if errors.Is(err, fs.ErrClosed) {
			return experimentalsys.ENOENT // as in top
		}
		return errnoOf(err)
	}
	fi, err := osf.Stat()
	errno := errnoOf(err)
	if errno == 0 && (!fi.Mode().IsRegular() && !fi.IsDir() || pseudo(osf)) {
		// A named pipe, a socket or a device: reading or writing one can
		// block past the call's deadline, or reach beyond the directory.
		// A file of /proc or /sys is the host's memory or settings.
		errno = experimentalsys.EACCES
	}
	if errno == 0 && f.fs.open.Add(1) > MaxOpenFiles {
		// One call holding every descriptor would starve the server.
		// (wazero's errors have no EMFILE; EAGAIN says to try later.)
		f.fs.open.Add(-1)
		errno = experimentalsys.EAGAIN
	}
	if errno != 0 {
		osf.Close()
		return errno
	}
	st := sys.NewStat_t(fi)
	f.f, f.stat = osf, &fileStat{dev: st.Dev, ino: st.Ino, isDir: fi.IsDir()}
	return 0
}

// MaxOpenFiles bounds the files and directories open at once through one
// granted directory, by every instance of its program together.
const MaxOpenFiles = 1024

// Lstat implements sys.FS.
func (f *FS) Lstat(p string) (sys.Stat_t, experimentalsys.Errno) {
	if tooLong(p) {
		return sys.Stat_t{}, experimentalsys.ENAMETOOLONG
	}
	fi, err := f.root.Lstat(rel(p))
	if err != nil {
		return sys.Stat_t{}, errnoOf(err)
	}
	return sys.NewStat_t(fi), 0
}

// Stat implements sys.FS.
func (f *FS) Stat(p string) (sys.Stat_t, experimentalsys.Errno) {
	if tooLong(p) {
		return sys.Stat_t{}, experimentalsys.ENAMETOOLONG
	}
	fi, err := f.root.Stat(rel(p))
	if err != nil {
		return sys.Stat_t{}, errnoOf(err)
	}
	return sys.NewStat_t(fi), 0
}

// Mkdir implements sys.FS.
func (f *FS) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	if tooLong(p) {
		return experimentalsys.ENAMETOOLONG
	}
	if !f.write {
		return experimentalsys.EROFS
	}
	errno := errnoOf(f.root.Mkdir(rel(p), perm&fs.ModePerm))
	if errno == experimentalsys.ENOTDIR {
		errno = experimentalsys.ENOENT // as wazero's own
	}
	return errno
}

// Chmod implements sys.FS.
func (f *FS) Chmod(p string, perm fs.FileMode) experimentalsys.Errno {
	if tooLong(p) {
		return experimentalsys.ENAMETOOLONG
	}
	if !f.write {
		return experimentalsys.EROFS
	}
	return errnoOf(f.root.Chmod(rel(p), perm))
}

// Rename implements sys.FS.
func (f *FS) Rename(from, to string) experimentalsys.Errno {
	if tooLong(from, to) {
		return experimentalsys.ENAMETOOLONG
	}
	if !f.write {
		return experimentalsys.EROFS
	}
	from, to = rel(from), rel(to)
	err := f.root.Rename(from, to)
	if errnoOf(err) == experimentalsys.EEXIST {
		// os.Root never replaces a directory; rename(2) replaces an empty
		// one by a directory, and answers the rest itself.
		return f.renameOverDir(from, to)
	}
	return errnoOf(err)
}

// Rmdir implements sys.FS.
func (f *FS) Rmdir(p string) experimentalsys.Errno {
	if tooLong(p) {
		return experimentalsys.ENAMETOOLONG
	}
	if !f.write {
		return experimentalsys.EROFS
	}
	name := rel(p)
	// os.Root removes a file or a directory; rmdir(2) only the latter. A
	// file put in its place meanwhile is removed, within the root.
	fi, err := f.root.Lstat(name)
	if err != nil {
		return errnoOf(err)
	}
	if !fi.IsDir() {
		return experimentalsys.ENOTDIR
	}
	return errnoOf(f.root.Remove(name))
}

// Unlink implements sys.FS.
func (f *FS) Unlink(p string) experimentalsys.Errno {
	if tooLong(p) {
		return experimentalsys.ENAMETOOLONG
	}
	if !f.write {
		return experimentalsys.EROFS
	}
	name := rel(p)
	fi, err := f.root.Lstat(name)
	if err != nil {
		return errnoOf(err)
	}
	if fi.IsDir() {
		return experimentalsys.EISDIR
	}
	return errnoOf(f.root.Remove(name))
}

// Link implements sys.FS. Both paths resolve within the root, and a link
// in oldPath is linked itself, not followed (linkat without
// AT_SYMLINK_FOLLOW).
func (f *FS) Link(oldPath, newPath string) experimentalsys.Errno {
	if tooLong(oldPath, newPath) {
		return experimentalsys.ENAMETOOLONG
	}
	if !f.write {
		return experimentalsys.EROFS
	}
	return errnoOf(f.root.Link(rel(oldPath), rel(newPath)))
}

// Symlink implements sys.FS. A link whose target is absolute, or climbs
// above the root from where it is made, is refused (EPERM): the root would
// not follow it, but the host's own tools would.
func (f *FS) Symlink(target, link string) experimentalsys.Errno {
	if tooLong(target, link) {
		return experimentalsys.ENAMETOOLONG
	}
	if !f.write {
		return experimentalsys.EROFS
	}
	link = rel(link)
	if escapes(target, link) {
		return experimentalsys.EPERM
	}
	return errnoOf(f.root.Symlink(filepath.FromSlash(target), link))
}

// escapes reports whether target, read from a link at link (relative to
// the root), could name something outside the root: any ".." counts, since
// a link that climbs can be renamed, or reached through another link, to
// climb out (d -> ".", then d/x -> "../out" is "../out" at the top).
func escapes(target, link string) bool {
	if target == "" || path.IsAbs(target) || filepath.IsAbs(target) || filepath.VolumeName(target) != "" ||
		filepath.Separator == '\\' && strings.ContainsRune(target, '\\') {
		return true
	}
	for _, el := range strings.Split(target, "/") {
		if el == ".." {
			return true
		}
	}
	return false
}

// Readlink implements sys.FS. A link on a file system of the kernel's own
// is refused (EACCES), as opening its files is (readlink in fs_linux.go):
// /proc/self/exe and /proc/self/cwd name the host's files.
func (f *FS) Readlink(p string) (string, experimentalsys.Errno) {
	if tooLong(p) {
		return "", experimentalsys.ENAMETOOLONG
	}
	target, err := readlink(f.root, rel(p))
	if err != nil {
		return "", errnoOf(err)
	}
	return filepath.ToSlash(target), 0
}

// Utimens implements sys.FS.
func (f *FS) Utimens(p string, atim, mtim int64) experimentalsys.Errno {
	if tooLong(p) {
		return experimentalsys.ENAMETOOLONG
	}
	if !f.write {
		return experimentalsys.EROFS
	}
	return errnoOf(f.root.Chtimes(rel(p), timeOf(atim), timeOf(mtim)))
}

// timeOf is a time for os.Root.Chtimes, whose zero time leaves it as is.
func timeOf(nanos int64) time.Time {
	if nanos == experimentalsys.UTIME_OMIT {
		return time.Time{}
	}
	return time.Unix(0, nanos)
}
