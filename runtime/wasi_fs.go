package runtime

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental/sysfs"

	"github.com/berm-dev/berm/runtime/sandbox"
)

// fsConfig is the file system of inst, an instance of a WASI program p:
// each granted directory seen through the call inst runs (sandbox.FS.Bind),
// so that a long read or write of a granted file ends with the call.
func (p *Program) fsConfig(inst *instance) wazero.FSConfig {
	ctx := func() context.Context { return inst.sleeper.ctx }
	fsc := wazero.NewFSConfig()
	for i, m := range p.mounts {
		fsc = fsc.(sysfs.FSConfig).WithSysFSMount(m.(*sandbox.FS).Bind(ctx), p.Grants.Dirs[i].Guest)
	}
	return fsc
}

// MaxNotGranted bounds the lines of one top-level call's log that say a
// path was not granted; the rest are counted (logBudget.outputNotes). A
// program that probes for its configuration in a dozen places says so
// once each, not for every file it might have read.
const MaxNotGranted = 10

// A path outside every grant names no descriptor: Go's os asks the host
// with descriptor -1 (and the rest of the path), which wazero answers
// EBADF ("lstat /etc: Bad file number"); wasi-libc refuses it itself
// (ENOTCAPABLE, "Capabilities insufficient") and never asks. So berm says
// in the call's log, when a path function is given a negative descriptor,
// which path was not granted and what is.
//
// What the program sees stays EBADF: a listener cannot change what wazero
// returns, and a preopen at "/" that refused every path (EACCES, "permission
// denied") would tell every program that reads its preopens as its grants
// (the files example does) that "/" is granted.

// notGranted logs, in c, that the program's op on path was outside its
// grants: path as the program named it, from the root.
func (c *Call) notGranted(ctx context.Context, op string, path []byte) {
	if c.rt.log == nil || !c.logs.takeNotGranted() {
		return
	}
	shown := "/" + strings.TrimLeft(string(path), "/")
	if !utf8.ValidString(shown) || strings.ContainsFunc(shown, unicode.IsControl) {
		shown = strconv.Quote(shown) // one line, whatever the program wrote
	}
	c.logLine(ctx, fmt.Appendf(nil, "berm: %s %s: not granted (%s)", op, shown, c.program.grantedHint()))
}

// grantedHint names the directories p is granted, as the program sees them,
// and how to grant another.
func (p *Program) grantedHint() string {
	if len(p.Grants.Dirs) == 0 {
		return "hint: no directory is granted; a deployment grants one with --allow-dir HOST[:GUEST]"
	}
	var dirs []string
	for _, d := range p.Grants.Dirs {
		mode := "read-only"
		if d.Write {
			mode = "read-write"
		}
		dirs = append(dirs, d.Guest+" "+mode)
	}
	return "hint: granted are " + strings.Join(dirs, ", ") + "; a deployment grants another with --allow-dir HOST[:GUEST]"
}
