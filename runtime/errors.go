package runtime

import (
	"errors"
	"fmt"
	"strings"

	"github.com/berm-dev/berm/manifest"
)

// The host's errors: the outer level of a call's outcome (ABI.md, One call).
// Each is wrapped with the object at fault; test with errors.Is.
var (
	// ErrNoProgram: nothing is deployed under that name.
	ErrNoProgram = errors.New("no such program")
	// ErrNoTool: the program has no tool of that name.
	ErrNoTool = errors.New("no such tool")
	// ErrArguments: the arguments were refused before anything ran (not a JSON
	// object, over the size limit, or not valid against the tool's parameters).
	// It is manifest.ErrArguments, so either name matches.
	ErrArguments = manifest.ErrArguments
	// ErrTrap: the instance trapped: an unknown or undeclared syscall, an
	// unprovided import, a bad memory access or frame, unreachable code.
	ErrTrap = errors.New("program trapped")
	// ErrDeadline: the call ran past its deadline (shared by nested calls).
	ErrDeadline = errors.New("deadline exceeded")
	// ErrLimit: a result or failure message over the size limit.
	ErrLimit = errors.New("over the size limit")
	// ErrRefused: a deployment the host will not run (see the message).
	ErrRefused = errors.New("deployment refused")
	// ErrClosed: the runtime was closed.
	ErrClosed = errors.New("runtime closed")
	// ErrHost: the host failed at its part, through no fault of the image,
	// the program or the arguments. An I/O error of the compilation cache
	// (wrapped: errors.As finds the *fs.PathError), the memory of all
	// instances at Limits.TotalMemory (try again later), or a host syscall's
	// error, which also traps (ErrTrap) and whose text goes only to
	// Config.HostError.
	ErrHost = errors.New("host error")
)

// trap is panicked inside a syscall to stop the instance; wazero recovers it
// and returns it wrapped, so errors.As finds it again. err, if any, is what it
// wraps: ErrHost for a host syscall's failure.
type trap struct {
	msg string
	err error
}

func (t *trap) Error() string { return t.msg }

func (t *trap) Unwrap() error { return t.err }

// trimmed is an error under a message of its own: wazero's, without the
// stack trace.
type trimmed struct {
	msg string
	err error
}

func (t *trimmed) Error() string { return t.msg }

func (t *trimmed) Unwrap() error { return t.err }

func trapf(format string, args ...any) *trap { return &trap{msg: fmt.Sprintf(format, args...)} }

// firstLine drops wazero's wasm stack trace from an error message: the
// message names the problem, and the trace is noise to a model or a user.
func firstLine(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "\nwasm stack trace:"); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSuffix(msg, " (recovered by wazero)")
}
