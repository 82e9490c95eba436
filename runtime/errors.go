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
)

// trap is panicked inside a syscall to stop the instance; wazero recovers it
// and returns it wrapped, so errors.As finds it again.
type trap struct{ msg string }

func (t *trap) Error() string { return t.msg }

func trapf(format string, args ...any) *trap { return &trap{fmt.Sprintf(format, args...)} }

// firstLine drops wazero's wasm stack trace from an error message: the
// message names the problem, and the trace is noise to a model or a user.
func firstLine(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "\nwasm stack trace:"); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSuffix(msg, " (recovered by wazero)")
}
