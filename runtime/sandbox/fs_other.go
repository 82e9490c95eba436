//go:build !unix

package sandbox

import (
	"io"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// oDirectory is O_DIRECTORY, which only Unix has: elsewhere wazero's
// path_open checks the opened file is a directory.
const oDirectory = 0

// oNonblock is O_NONBLOCK, which only Unix has (see fs_unix.go).
const oNonblock = 0

// renameOverDir renames from over to, an existing directory, as rename(2)
// does where os.Root refuses to: an empty directory is removed, then
// replaced by a directory. Without renameat (fs_unix.go) it takes six more
// resolutions of the paths, and two steps.
func (f *FS) renameOverDir(from, to string) experimentalsys.Errno {
	src, err := f.root.Lstat(from)
	if err != nil {
		return errnoOf(err)
	}
	if !src.IsDir() {
		return experimentalsys.EISDIR
	}
	dst, err := f.root.Open(to)
	if err != nil {
		return errnoOf(err)
	}
	names, err := dst.Readdirnames(1)
	dst.Close()
	if len(names) > 0 {
		return experimentalsys.ENOTEMPTY
	}
	if err != nil && err != io.EOF {
		return errnoOf(err)
	}
	if errno := f.Rmdir(to); errno != 0 {
		return errno
	}
	return errnoOf(f.root.Rename(from, to))
}
