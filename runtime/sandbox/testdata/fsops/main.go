// Command fsops is a WASI command (GOOS=wasip1) that tries one file-system
// operation through Go's os package, for the sandbox's escape tests:
//
//	fsops OP PATH [PATH2]
//
// It prints what it read (read, readlink, ls, stat) and exits 0, or exits
// with the WASI errno the operation failed with (125 for another error).
// build.sh beside it builds fsops.wasm.
package main

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		os.Stderr.WriteString("usage: fsops OP PATH [PATH2]\n")
		os.Exit(125)
	}
	op, p, q := os.Args[1], os.Args[2], ""
	if len(os.Args) > 3 {
		q = os.Args[3]
	}
	out, err := run(op, p, q)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		var errno syscall.Errno
		if errors.As(err, &errno) {
			os.Exit(int(errno))
		}
		os.Exit(125)
	}
	os.Stdout.WriteString(out)
}

func run(op, p, q string) (string, error) {
	switch op {
	case "read":
		b, err := os.ReadFile(p)
		return string(b), err
	case "write": // create or truncate
		return "", os.WriteFile(p, []byte("written by fsops"), 0o644)
	case "create":
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			err = f.Close()
		}
		return "", err
	case "append":
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return "", err
		}
		_, err = f.WriteString("appended by fsops")
		return "", errors.Join(err, f.Close())
	case "truncate":
		return "", os.Truncate(p, 0)
	case "rename":
		return "", os.Rename(p, q)
	case "unlink":
		return "", syscall.Unlink(p)
	case "rmdir":
		return "", syscall.Rmdir(p)
	case "mkdir":
		return "", os.Mkdir(p, 0o755)
	case "chmod":
		return "", os.Chmod(p, 0o777)
	case "utimes":
		t := time.Unix(1, 0)
		return "", os.Chtimes(p, t, t)
	case "symlink": // symlink TARGET LINK
		return "", os.Symlink(p, q)
	case "link": // link OLD NEW
		return "", os.Link(p, q)
	case "readlink":
		return os.Readlink(p)
	case "ls":
		entries, err := os.ReadDir(p)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return strings.Join(names, "\n"), err
	case "stat":
		fi, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		return fi.Mode().String() + " " + strconv.FormatInt(fi.Size(), 10), nil
	}
	return "", errors.New("unknown operation " + op)
}
