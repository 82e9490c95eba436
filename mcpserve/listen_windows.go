package mcpserve

import (
	"errors"
	"syscall"
)

// wsaeaddrinuse is Winsock's WSAEADDRINUSE, which syscall does not name.
const wsaeaddrinuse = syscall.Errno(10048)

func addrInUse(err error) bool { return errors.Is(err, wsaeaddrinuse) }
