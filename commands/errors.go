package commands

import (
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/berm-dev/berm/internal/control"
	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/registry"
	"github.com/berm-dev/berm/registry/index"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/sandbox"
	"github.com/berm-dev/berm/runtime/store"
)

// programFailure is the program's own failure: exit 1, its message on stderr.
type programFailure struct{ message string }

func (f *programFailure) Error() string { return f.message }

// usageError is a mistake in the command line itself.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// outputError is a failure to write stdout: the command may have done its
// work, but its output is lost. No hint: stdout is the caller's to fix.
type outputError struct{ err error }

func (o outputError) Error() string { return "output: " + o.err.Error() }
func (o outputError) Unwrap() error { return o.err }

// errorWithHint carries the fix for an error the user can make.
type errorWithHint struct {
	err  error
	hint string
}

func (e errorWithHint) Error() string { return e.err.Error() }
func (e errorWithHint) Unwrap() error { return e.err }

func withHint(err error, format string, args ...any) error {
	return errorWithHint{err: err, hint: fmt.Sprintf(format, args...)}
}

// hostHints are the host's faults whose fix does not depend on context.
// They come before any other hint: a write that failed for want of disk
// space must not send the user to fix an image or a name that is fine.
var hostHints = []struct {
	err  error
	hint string
}{
	{syscall.ENOSPC, "the disk holding the root is full: free space or choose another --root"},
	{syscall.EDQUOT, "the disk quota of the root is used up: free space or choose another --root"},
	{syscall.EFBIG, "a limit on file size (ulimit -f) stops writes under the root: raise it"},
}

// hints gives the fix for the errors whose fix does not depend on context.
var hints = []struct {
	err error
	// also, when set, must be in the chain too.
	also error
	hint string
}{
	{store.ErrNotDeployed, nil, "`berm ls` lists what is deployed (with --server, on that server)"},
	{index.ErrLayer, nil, "the registry and the index disagree on what this reference is: deploy nothing from it until its publisher or the index's maintainers say which is right"},
	{sandbox.ErrGrant, nil, "`berm deploy --help` shows every grant flag and its syntax"},
	{runtime.ErrNoTool, nil, "`berm inspect NAME` lists a program's tools"},
	{runtime.ErrLimit, runtime.ErrArguments, "send smaller arguments, or raise the limit with --max-args"},
	{runtime.ErrLimit, nil, "raise the limit with --max-result"},
	{manifest.ErrCostly, nil, "the tool's parameters schema is too costly to check for arguments like these: send them smaller or less deeply nested; `berm inspect NAME` shows the schema, which the program's author can simplify"},
	{runtime.ErrArguments, nil, "`berm inspect NAME` shows each tool's parameters"},
	{runtime.ErrDeadline, nil, "give the call more time with --timeout"},
	{runtime.ErrOutOfMemory, nil, "give each instance more memory with --memory (berm run, berm serve), or have the program use less"},
	{manifest.ErrProgramName, nil, "a program name is 1 to 63 characters of a-z, 0-9 and '-', starting with a letter or digit"},
	{manifest.ErrNoManifest, nil, "a berm program carries its manifest in a .berm.abi custom section (see ABI.md)"},
	{store.ErrDamaged, nil, "deploy the program again to replace the damaged file"},
	{registry.ErrUnauthorized, nil, "log in first: echo \"$TOKEN\" | berm login --username NAME REGISTRY"},
	{registry.ErrNotFound, nil, "check the reference (host/repo:tag); berm push REF FILE publishes one"},
	{registry.ErrUnreachable, nil, "check the host and port the reference starts with (HOST[:PORT]/REPO:TAG), that a registry serves there, and the network between (HTTPS_PROXY is honored)"},
	{registry.ErrSlow, nil, "on a link that is slow but sound, raise --registry-timeout or lower --registry-min-rate (0 turns either off)"},
	{control.ErrUnauthorized, nil, "give the server's token with --token or BERM_TOKEN"},
	{control.ErrUnreachable, nil, "is berm serve running there? check --server, --context, BERM_SERVER and BERM_CONTEXT (berm context show says which one chose it)"},
}

// printError prints err and its hint. An error may quote what a registry,
// a server or an image said, so it goes through printable.
func printError(w io.Writer, err error) {
	fmt.Fprintf(w, "berm: error: %s\n", printable(err.Error()))
	if hint := hintFor(err); hint != "" {
		fmt.Fprintf(w, "berm: hint: %s\n", printable(hint))
	}
}

// hintFor is the fix printed under err, or "".
func hintFor(err error) string {
	var o outputError
	if errors.As(err, &o) {
		return ""
	}
	for _, x := range hostHints {
		if errors.Is(err, x.err) {
			return x.hint
		}
	}
	var h errorWithHint
	if errors.As(err, &h) {
		return h.hint
	}
	var u usageError
	if errors.As(err, &u) {
		return "see `berm --help` or `berm COMMAND --help`"
	}
	for _, x := range hints {
		if errors.Is(err, x.err) && (x.also == nil || errors.Is(err, x.also)) {
			return x.hint
		}
	}
	return ""
}
