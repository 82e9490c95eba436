//go:build !unix

package mcpserve

import "io"

// pollable is r itself where pipes do not join Go's network poller.
func pollable(r io.Reader) (io.Reader, func()) { return r, func() {} }
