//go:build unix

package sandbox

import "syscall"

// oDirectory is O_DIRECTORY, which os does not name.
const oDirectory = syscall.O_DIRECTORY
