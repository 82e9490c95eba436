//go:build !unix

package sandbox

// oDirectory is O_DIRECTORY, which only Unix has: elsewhere wazero's
// path_open checks the opened file is a directory.
const oDirectory = 0

// oNonblock is O_NONBLOCK, which only Unix has (see fs_unix.go).
const oNonblock = 0
