package sandbox

import (
	"errors"
	"io"
	"os"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
)

// file is a sys.File over an *os.File opened through an FS's root. Unlike
// wazero's own, it never reopens a file by its host path: SetAppend reopens
// it through the root, by the name it was opened with, and only if that
// still names the same file.
type file struct {
	fs   *FS
	f    *os.File
	name string // relative to the root
	flag experimentalsys.Oflag

	append   bool
	nonblock bool
	closed   bool

	// stat holds what cannot change while the file is open.
	stat *fileStat
}

type fileStat struct {
	dev   uint64
	ino   sys.Inode
	isDir bool
}

var _ experimentalsys.PollableFile = (*file)(nil)

func (f *file) cached() (*fileStat, experimentalsys.Errno) {
	if f.stat == nil {
		if _, errno := f.Stat(); errno != 0 {
			return nil, errno
		}
	}
	return f.stat, 0
}

// load opens the directory itself from the host, at the first use that
// needs it (FS.top).
func (f *file) load() experimentalsys.Errno {
	if f.f != nil {
		return 0
	}
	if f.closed {
		return experimentalsys.EBADF
	}
	return f.openOS(0)
}

// Dev implements sys.File.
func (f *file) Dev() (uint64, experimentalsys.Errno) {
	st, errno := f.cached()
	if errno != 0 {
		return 0, errno
	}
	return st.dev, 0
}

// Ino implements sys.File.
func (f *file) Ino() (sys.Inode, experimentalsys.Errno) {
	st, errno := f.cached()
	if errno != 0 {
		return 0, errno
	}
	return st.ino, 0
}

// IsDir implements sys.File.
func (f *file) IsDir() (bool, experimentalsys.Errno) {
	st, errno := f.cached()
	if errno != 0 {
		return false, errno
	}
	return st.isDir, 0
}

// IsAppend implements sys.File.
func (f *file) IsAppend() bool { return f.append }

// SetAppend implements sys.File. The descriptor's O_APPEND cannot be
// changed portably, so the file is opened again through the root, by the
// name it was opened with; if that name no longer leads to this file (it was
// renamed or replaced), ENOENT, as wazero's own answers.
func (f *file) SetAppend(enable bool) experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	if isDir, errno := f.IsDir(); errno != 0 {
		return errno
	} else if isDir {
		return experimentalsys.EISDIR
	}
	if enable == f.append {
		return 0
	}
	if !f.fs.write {
		// Opened to read only: appending changes nothing.
		f.append = enable
		return 0
	}
	flag := f.flag &^ (experimentalsys.O_CREAT | experimentalsys.O_EXCL | experimentalsys.O_TRUNC | experimentalsys.O_APPEND)
	if enable {
		flag |= experimentalsys.O_APPEND
	}
	pos, err := f.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return errnoOf(err)
	}
	nf, err := f.fs.root.OpenFile(f.name, osFlag(flag), 0)
	if err != nil {
		return errnoOf(err)
	}
	was, err1 := f.f.Stat()
	now, err2 := nf.Stat()
	if err := errors.Join(err1, err2); err != nil || !os.SameFile(was, now) {
		nf.Close()
		if err != nil {
			return errnoOf(err)
		}
		return experimentalsys.ENOENT
	}
	if _, err := nf.Seek(pos, io.SeekStart); err != nil {
		nf.Close()
		return errnoOf(err)
	}
	f.f.Close()
	f.f, f.flag, f.append = nf, flag, enable
	return 0
}

// IsNonblock implements sys.PollableFile.
func (f *file) IsNonblock() bool { return f.nonblock }

// SetNonblock implements sys.PollableFile. Regular files and directories
// never block, so the flag is only kept for fd_fdstat_get.
func (f *file) SetNonblock(enable bool) experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	f.nonblock = enable
	return 0
}

// Poll implements sys.Pollable: a regular file or a directory is always
// ready.
func (f *file) Poll(flag experimentalsys.Pflag, _ int32) (bool, experimentalsys.Errno) {
	if f.closed {
		return false, experimentalsys.EBADF
	}
	if flag&^(experimentalsys.POLLIN|experimentalsys.POLLOUT) != 0 {
		return false, experimentalsys.ENOTSUP
	}
	return true, 0
}

// Stat implements sys.File.
func (f *file) Stat() (sys.Stat_t, experimentalsys.Errno) {
	if f.closed {
		return sys.Stat_t{}, experimentalsys.EBADF
	}
	var fi os.FileInfo
	var err error
	if f.f == nil {
		fi, err = f.fs.root.Stat(f.name) // the directory itself, not yet loaded
	} else {
		fi, err = f.f.Stat()
	}
	if err != nil {
		return sys.Stat_t{}, errnoOf(err)
	}
	st := sys.NewStat_t(fi)
	f.stat = &fileStat{dev: st.Dev, ino: st.Ino, isDir: fi.IsDir()}
	return st, 0
}

// fileErr corrects errno for a file that is closed or a directory, as
// wazero's own files do.
func (f *file) fileErr(errno experimentalsys.Errno) experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	if isDir, e := f.IsDir(); e != 0 {
		return e
	} else if isDir {
		return experimentalsys.EISDIR
	}
	return errno
}

// Chunk bounds what one read or write of a file moves before it looks again
// at whether its instance's call is done (FS.Bind): a megabyte takes the
// host well under a millisecond from the page cache.
const Chunk = 1 << 20

// over reports whether the call of the instance f belongs to is done.
func (f *file) over() bool { return f.fs.ctx != nil && f.fs.ctx().Err() != nil }

// chunked moves buf a Chunk at a time through move, given each chunk and
// where it starts in buf, until all of buf is moved, move moves less than
// it was given or fails, or the call is over. It returns what was moved,
// and whether the call was over before anything was: EINTR then, as a
// signal would give, so that wazero's writev stops at that iovec rather
// than go on to the next.
func (f *file) chunked(buf []byte, move func(b []byte, at int) (int, error)) (n int, err error, interrupted bool) {
	for n < len(buf) {
		if f.over() {
			return n, nil, n == 0
		}
		b := buf[n:]
		if len(b) > Chunk {
			b = b[:Chunk]
		}
		m, err := move(b, n)
		n += m
		if err != nil || m < len(b) {
			return n, err, false
		}
	}
	return n, nil, false
}

// Read implements sys.File.
func (f *file) Read(buf []byte) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	if errno := f.load(); errno != 0 {
		return 0, errno
	}
	n, err, interrupted := f.chunked(buf, func(b []byte, _ int) (int, error) { return f.f.Read(b) })
	if interrupted {
		return 0, experimentalsys.EINTR
	}
	if err != nil && err != io.EOF {
		return n, f.fileErr(errnoOf(err))
	}
	return n, 0
}

// Pread implements sys.File.
func (f *file) Pread(buf []byte, off int64) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	if off < 0 {
		return 0, experimentalsys.EINVAL
	}
	if errno := f.load(); errno != 0 {
		return 0, errno
	}
	n, err, interrupted := f.chunked(buf, func(b []byte, at int) (int, error) { return f.f.ReadAt(b, off+int64(at)) })
	if interrupted {
		return 0, experimentalsys.EINTR
	}
	if err != nil && err != io.EOF {
		return n, f.fileErr(errnoOf(err))
	}
	return n, 0
}

// Seek implements sys.File. A directory only rewinds (offset 0 from the
// start), which makes its next Readdir start over.
func (f *file) Seek(off offset, whence int) (int64, experimentalsys.Errno) {
	if f.closed {
		return 0, experimentalsys.EBADF
	}
	if uint(whence) > io.SeekEnd {
		return 0, experimentalsys.EINVAL
	}
	if isDir, errno := f.IsDir(); errno != 0 {
		return 0, errno
	} else if isDir && (off != 0 || whence != io.SeekStart) {
		return 0, experimentalsys.EISDIR
	}
	if errno := f.load(); errno != 0 {
		return 0, errno
	}
	n, err := f.f.Seek(off, whence)
	if err != nil {
		return 0, f.fileErr(errnoOf(err))
	}
	return n, 0
}

// offset is int64 by another name, so that vet does not take Seek above for
// a misspelt io.Seeker: sys.File's returns an Errno, not an error.
type offset = int64

// Readdir implements sys.File. os leaves out "." and "..", which wazero
// adds itself.
func (f *file) Readdir(n int) ([]experimentalsys.Dirent, experimentalsys.Errno) {
	if f.closed {
		return nil, experimentalsys.EBADF
	}
	if isDir, errno := f.IsDir(); errno != 0 {
		return nil, errno
	} else if !isDir {
		return nil, experimentalsys.EBADF // as wazero's own
	}
	// wazero asks for as many entries as the program's buffer could hold
	// (5 million in 128 MiB), and os stats each: they are read a batch at
	// a time, and no more once the call is over, which wazero takes for
	// the directory's end (the call traps at its next host function).
	if errno := f.load(); errno != 0 {
		return nil, errno
	}
	var dirents []experimentalsys.Dirent
	for n <= 0 || len(dirents) < n {
		if f.over() && len(dirents) > 0 {
			break
		}
		batch := readdirBatch
		if n > 0 {
			batch = min(batch, n-len(dirents))
		}
		fis, err := f.f.Readdir(batch)
		if err != nil && err != io.EOF {
			if len(dirents) > 0 {
				break // the next read meets it again
			}
			errno := errnoOf(err)
			if errno == experimentalsys.EINVAL || errno == experimentalsys.ENOTDIR {
				errno = experimentalsys.EBADF
			}
			return nil, errno
		}
		for _, fi := range fis {
			dirents = append(dirents, experimentalsys.Dirent{Name: fi.Name(), Ino: sys.NewStat_t(fi).Ino, Type: fi.Mode().Type()})
		}
		if len(fis) < batch {
			break
		}
	}
	return dirents, 0
}

// readdirBatch is how many entries Readdir reads before it looks again at
// whether the call is over.
const readdirBatch = 1024

// Write implements sys.File.
func (f *file) Write(buf []byte) (int, experimentalsys.Errno) {
	if !f.fs.write {
		return 0, f.fileErr(experimentalsys.EBADF)
	}
	if len(buf) == 0 {
		return 0, 0
	}
	if errno := f.load(); errno != 0 {
		return 0, errno
	}
	return f.written(f.chunked(buf, func(b []byte, _ int) (int, error) { return f.f.Write(b) }))
}

// written is what a write returns of what chunked moved.
func (f *file) written(n int, err error, interrupted bool) (int, experimentalsys.Errno) {
	if interrupted {
		return 0, experimentalsys.EINTR
	}
	if err != nil {
		return n, f.fileErr(errnoOf(err))
	}
	return n, 0
}

// Pwrite implements sys.File. On a file in append mode it appends and
// leaves the offset as it was, as Linux's pwrite(2) does (os refuses
// WriteAt there).
func (f *file) Pwrite(buf []byte, off int64) (int, experimentalsys.Errno) {
	if !f.fs.write {
		return 0, f.fileErr(experimentalsys.EBADF)
	}
	if off < 0 {
		return 0, experimentalsys.EINVAL
	}
	if len(buf) == 0 {
		return 0, 0
	}
	if errno := f.load(); errno != 0 {
		return 0, errno
	}
	if f.flag&experimentalsys.O_APPEND == 0 {
		return f.written(f.chunked(buf, func(b []byte, at int) (int, error) { return f.f.WriteAt(b, off+int64(at)) }))
	}
	// pwrite(2) leaves the offset where it was.
	pos, err := f.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, f.fileErr(errnoOf(err))
	}
	n, err, interrupted := f.chunked(buf, func(b []byte, _ int) (int, error) { return f.f.Write(b) })
	if _, err2 := f.f.Seek(pos, io.SeekStart); err == nil {
		err = err2
	}
	return f.written(n, err, interrupted)
}

// Truncate implements sys.File.
func (f *file) Truncate(size int64) experimentalsys.Errno {
	if !f.fs.write {
		return f.fileErr(experimentalsys.EBADF)
	}
	if size < 0 {
		return experimentalsys.EINVAL
	}
	if errno := f.load(); errno != 0 {
		return errno
	}
	return f.fileErr(errnoOf(f.f.Truncate(size)))
}

// MaxSyncs bounds the syncs of one granted directory's files that run at
// once, by every instance of its program together, those whose calls are
// over included.
const MaxSyncs = 4

// Sync implements sys.File. fsync(2) takes as long as the disk needs for
// the file's dirty pages, and nothing ends it (0.35 s after 0.5 GB was
// written, at a deadline of 200 ms), so a bound file's runs apart: its
// call waits for it until the call is over, then gets EINTR, and the sync
// goes on to its end without it (an instance is discarded after its
// deadline). A call waits for its turn among MaxSyncs the same way.
func (f *file) Sync() experimentalsys.Errno {
	if errno := f.load(); errno != 0 {
		return errno
	}
	if f.fs.ctx == nil {
		return errnoOf(f.fs.fsync(f.f))
	}
	ctx := f.fs.ctx()
	select {
	case f.fs.syncs <- struct{}{}:
	case <-ctx.Done():
		return experimentalsys.EINTR
	}
	done := make(chan error, 1)
	// The file as it is now: SetAppend may put another in its place, and
	// closing this one waits for nothing (os closes it once the sync ends).
	go func(osf *os.File) {
		defer func() { <-f.fs.syncs }()
		done <- f.fs.fsync(osf)
	}(f.f)
	select {
	case err := <-done:
		return errnoOf(err)
	case <-ctx.Done():
		return experimentalsys.EINTR
	}
}

// Datasync implements sys.File.
func (f *file) Datasync() experimentalsys.Errno { return f.Sync() }

// Utimens implements sys.File. os has no futimens, so the times are set
// through the root by the name the file was opened with, once it is shown
// to still name this file.
func (f *file) Utimens(atim, mtim int64) experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	if !f.fs.write {
		return experimentalsys.EROFS
	}
	if errno := f.load(); errno != 0 {
		return errno
	}
	was, err1 := f.f.Stat()
	now, err2 := f.fs.root.Stat(f.name)
	if err := errors.Join(err1, err2); err != nil {
		return errnoOf(err)
	}
	if !os.SameFile(was, now) {
		return experimentalsys.ENOENT
	}
	return errnoOf(f.fs.root.Chtimes(f.name, timeOf(atim), timeOf(mtim)))
}

// Close implements sys.File.
func (f *file) Close() experimentalsys.Errno {
	if f.closed {
		return 0
	}
	f.closed = true
	if f.f == nil {
		return 0 // never loaded
	}
	f.fs.open.Add(-1)
	return errnoOf(f.f.Close())
}
