//go:build unix

package sandbox

import "syscall"

// oDirectory is O_DIRECTORY, which os does not name.
const oDirectory = syscall.O_DIRECTORY

// oNonblock opens every file without blocking: opening a named pipe blocks
// until a writer comes, beyond the reach of the call's deadline. Regular
// files and directories ignore it; anything else is refused once open.
const oNonblock = syscall.O_NONBLOCK
