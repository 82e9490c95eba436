//go:build unix

package mcpserve

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// pollable returns a reader of what r reads that waits in Go's network
// poller, and a release to call once reading is done, when r is a pipe or a
// socket (how an MCP client starts a stdio server); otherwise r itself.
//
// A parent hands its child a pipe in blocking mode, and Go reads a blocking
// file with a read(2) that holds its thread, and the thread's processor,
// until bytes come. The reading goroutine hands each message on and reads
// again at once: the goroutine it woke waits on a processor held by a thread
// asleep in the kernel, until another thread is woken to take it. In the
// poller the reader parks instead, and the message is handled on the same
// thread at once. The poller needs a descriptor in non-blocking mode; the
// mode belongs to the pipe, shared with any other process reading it, so
// the descriptor is a duplicate and release puts the mode back.
func pollable(r io.Reader) (io.Reader, func()) {
	f, ok := r.(*os.File)
	if !ok {
		return r, func() {}
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return r, func() {}
	}
	sc, err := f.SyscallConn()
	if err != nil {
		return r, func() {}
	}
	dup, wasNonblock := -1, false
	_ = sc.Control(func(fd uintptr) {
		flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		wasNonblock = err == nil && flags&unix.O_NONBLOCK != 0
		if d, err := unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0); err == nil {
			dup = d
		}
	})
	if dup < 0 {
		return r, func() {}
	}
	if err := unix.SetNonblock(dup, true); err != nil {
		unix.Close(dup)
		return r, func() {}
	}
	// NewFile joins the poller with a descriptor already non-blocking.
	pf := os.NewFile(uintptr(dup), f.Name())
	return pf, func() {
		if !wasNonblock {
			_ = unix.SetNonblock(dup, false)
		}
		pf.Close() // a read still waiting returns
	}
}
