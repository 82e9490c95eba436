//go:build !linux

package sandbox

import (
	"errors"
	"os"
	"path/filepath"
)

// openRoot opens the directory at host as an os.Root, refusing a path with
// a symbolic link in any element. Without Linux's O_PATH walk the check and
// the open are two steps: a link swapped in between them is caught by
// Mount's comparison of what was opened with what the path names.
func openRoot(host string) (*os.Root, error) {
	if real, err := filepath.EvalSymlinks(host); err != nil {
		return nil, err
	} else if real != host {
		return nil, errors.New("a symbolic link is in its path: grant the directory it points to (" + real + ")")
	}
	return os.OpenRoot(host)
}

// pseudo reports whether f is on a file system of the kernel's own; only
// Linux's are known (fs_linux.go).
func pseudo(*os.File) bool { return false }

// readlink reads the link at name in root; only Linux's kernel file
// systems are known (fs_linux.go).
func readlink(root *os.Root, name string) (string, error) { return root.Readlink(name) }
