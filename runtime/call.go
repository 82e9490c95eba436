package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/tetratelabs/wazero/sys"

	"github.com/berm-dev/berm/manifest"
)

// Outcome is the program's own outcome of a call (the inner level): its
// result, or its failure.
type Outcome struct {
	// Result is what the program last gave berm.result; empty when it never
	// called it, and when it failed.
	Result []byte
	// Failed is set when the program called berm.fail; a failure wins over a
	// result.
	Failed bool
	// Failure is the message of the program's last berm.fail.
	Failure []byte
}

type callKey struct{}

// Call runs a program's tool with args, a JSON object. The error is the
// host's (ErrNoProgram, ErrNoTool, ErrArguments, ErrTrap, ErrDeadline,
// ErrLimit); the Outcome is the program's result or failure.
func (r *Runtime) Call(ctx context.Context, program, tool string, args []byte) (Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, r.limits.Deadline)
	defer cancel()
	return r.call(ctx, program, tool, args, nil)
}

// call runs a top-level call (caller nil) or one nested in caller's.
func (r *Runtime) call(ctx context.Context, program, tool string, args []byte, caller *Call) (Outcome, error) {
	r.running.Add(1)
	defer r.running.Add(-1)
	// An embedder's names may be anything too: its errors quote them as
	// a nested call's refusals do, made only for an error.
	full := func() string { s, _ := target(program, tool); return s }
	p, err := r.acquire(program)
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: %w", full(), err)
	}
	defer p.release()
	i, t := p.tool(tool)
	if t == nil {
		return Outcome{}, fmt.Errorf("%s: %w", full(), ErrNoTool)
	}
	if len(args) > r.limits.MaxArgs {
		// The caller's error (ErrArguments), and a size limit (ErrLimit).
		return Outcome{}, fmt.Errorf("%s: %w: %w: %d bytes, limit %d bytes",
			full(), ErrArguments, ErrLimit, len(args), r.limits.MaxArgs)
	}
	// The check is under the call's deadline and cancel: a schema can make
	// it long, past what it is bounded to in steps (manifest.CheckSteps).
	if err := t.ValidateContext(ctx, args); err != nil {
		return Outcome{}, r.argumentsError(full(), err)
	}
	// The first call takes the snapshot, and those that arrive meanwhile
	// wait for it, each within its own deadline. The snapshot is not under
	// any caller's deadline or cancel: what one caller gives up on must not
	// refuse it for every call after.
	if err := p.warmed(ctx); err != nil {
		return Outcome{}, r.warmError(full(), err)
	}
	c := &Call{rt: r, program: p, tool: tool, args: args}
	if caller != nil {
		c.depth, c.logs = caller.depth+1, caller.logs
	} else {
		c.ownLogs = logBudget{lines: r.limits.MaxLogLines, bytes: r.limits.MaxLogBytes}
		c.logs = &c.ownLogs
		defer r.logDropped(ctx, c)
	}
	// The instance's minimum is taken before it is made or taken from the
	// pool: wazero cannot fail the first allocation (it indexes what it
	// gets), so a full budget must be found before it starts.
	if !r.budget.take(p.minMemory) {
		return Outcome{}, fmt.Errorf("%s: %w: memory: an instance takes %d KiB (its memory and what wazero builds for it), more than is left of the limit of %d KiB on all instances together",
			full(), ErrHost, p.minMemory>>10, r.limits.TotalMemory>>10)
	}
	if err := r.run(ctx, c, i); err != nil {
		// A nested call's refusal tells its caller, another program, what
		// the host saw, never what the callee wrote: that goes to the log.
		fatal := c.fatal
		if caller != nil {
			fatal = ""
		}
		return Outcome{}, r.hostError(ctx, full(), err, fatal)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// A nested call ran out of the shared deadline and this one returned
		// before wazero noticed: it meets the same deadline.
		return Outcome{}, r.deadlineError(full())
	}
	final, what := c.result, "result"
	if c.failed {
		final, what = c.failure, "failure message"
	}
	if final.over > 0 {
		return Outcome{}, fmt.Errorf("%s: %w: %s of %d bytes, limit %d bytes",
			full(), ErrLimit, what, final.over, r.limits.MaxResult)
	}
	if c.failed {
		return Outcome{Failed: true, Failure: final.b}, nil
	}
	return Outcome{Result: final.b}, nil
}

// run runs the tool at index i of c's program in an instance of it (a
// pooled one reset to where calls start, or a new one; pool.go), which holds
// the p.minMemory bytes of the budget the call took.
func (r *Runtime) run(ctx context.Context, c *Call, i int) error {
	ctx = context.WithValue(ctx, callKey{}, c)
	inst, err := r.acquireInstance(ctx, c, c.program.minMemory)
	if err != nil {
		return r.endedByClose(err)
	}
	_, err = inst.tool(c.program, i).Call(ctx)
	ok := err == nil
	if err != nil && r.closing.Load() {
		err = r.endedByClose(err)
	} else if err != nil {
		var exit *sys.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 0 {
			err = nil // WASI proc_exit(0): the program ended, its outcome set
		}
	}
	// A call that ended in a deadline or cancel its code did not meet may
	// have stopped in a syscall: its instance is not trusted either.
	r.releaseInstance(c, inst, ok && ctx.Err() == nil)
	return err
}

// errInitialize marks what _initialize met at the start of a call, before
// the tool ran.
var errInitialize = errors.New("_initialize")

// endedByClose marks err as Close's doing when the runtime is closing: on
// the plain path wazero ends a call with exit code 0, which must not read as
// proc_exit(0) and a success, nor as a trap.
func (r *Runtime) endedByClose(err error) error {
	if err != nil && r.closing.Load() {
		return fmt.Errorf("%w: the call ended with it: %w", ErrClosed, err)
	}
	return err
}

// ErrOutOfMemory is wrapped with ErrTrap when the program said, before it
// trapped, that it ran out of memory (Go's "fatal error: out of memory"):
// it met Limits.Memory, or Limits.TotalMemory, in a memory.grow.
var ErrOutOfMemory = errors.New("out of memory")

// hostError turns what wazero returned into the host's error. fatal is the
// line of the call's output that said the program was dying (FatalLine),
// or "": a trap quotes it, since the model and the user see nothing else of
// a Go program's panic than "wasm error: unreachable".
func (r *Runtime) hostError(ctx context.Context, full string, err error, fatal string) error {
	var exit *sys.ExitError
	switch {
	case errors.Is(err, ErrClosed):
		return fmt.Errorf("%s: %w", full, ErrClosed)
	case errors.Is(err, errInitialize) && (errors.Is(ctx.Err(), context.DeadlineExceeded) ||
		errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded):
		return fmt.Errorf("%s: %w: _initialize, which this program runs at the start of each call, ran past %s before the tool started",
			full, ErrDeadline, r.limits.Deadline)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return r.deadlineError(full)
	case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded:
		return r.deadlineError(full)
	case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeContextCanceled,
		errors.Is(ctx.Err(), context.Canceled): // stopped by the tick or a syscall
		return fmt.Errorf("%s: canceled: %w", full, context.Canceled)
	case errors.As(err, &exit) && fatal != "":
		return fmt.Errorf("%s: %w: %w", full, ErrTrap, r.fatalError(fatal, fmt.Sprintf(" (it exited with code %d)", exit.ExitCode()), err))
	case errors.As(err, &exit):
		return fmt.Errorf("%s: %w: it exited with code %d", full, ErrTrap, exit.ExitCode())
	case fatal != "":
		return fmt.Errorf("%s: %w: %w", full, ErrTrap, r.fatalError(fatal, "", err))
	}
	// The message without wazero's stack trace, the chain as it was: a
	// syscall's host error stays ErrHost too.
	return fmt.Errorf("%s: %w: %w", full, ErrTrap, &trimmed{firstLine(err), err})
}

// fatalError is a trap's error under the program's own fatal line, then
// more; out of memory says the limit, and is ErrOutOfMemory too.
func (r *Runtime) fatalError(fatal, more string, err error) error {
	if fatal != "fatal error: out of memory" {
		return &trimmed{fatal + more, err}
	}
	limit := fmt.Sprintf("the instance's memory limit is %s", sizeText(r.limits.Memory))
	if r.limits.TotalMemory > 0 {
		limit += fmt.Sprintf(", all instances' together %s", sizeText(r.limits.TotalMemory))
	}
	return &trimmed{fmt.Sprintf("%s (%s)%s", fatal, limit, more), errors.Join(ErrOutOfMemory, err)}
}

// sizeText is n bytes in MiB, or in KiB when that is not whole.
func sizeText(n uint64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// logDropped ends a top-level call's log with the number of lines dropped
// past the limits, if any were.
func (r *Runtime) logDropped(ctx context.Context, c *Call) {
	if r.hostErr != nil && c.logs.hostDropped > 0 {
		r.hostErr(ctx, c.program.Name, c.tool, fmt.Errorf("%d more host errors in this call not reported (limit %d per call)",
			c.logs.hostDropped, MaxHostErrors))
	}
	if r.log == nil || c.logs.dropped == 0 {
		return
	}
	r.log(ctx, c.program.Name, c.tool, fmt.Appendf(nil, "berm: %d log lines dropped (limit %d lines, %d bytes per call)",
		c.logs.dropped, r.limits.MaxLogLines, r.limits.MaxLogBytes))
}

// MaxHostErrors bounds the host errors of one top-level call handed to
// Config.HostError: a program retrying a failing berm.set in a loop would
// otherwise write the operator's log as fast as it loops.
const MaxHostErrors = 10

// hostFailed hands a host syscall's error to the embedder's log, up to
// MaxHostErrors a call.
func (r *Runtime) hostFailed(ctx context.Context, c *Call, err error) {
	if r.hostErr == nil {
		return
	}
	if c.logs.hostErrors >= MaxHostErrors {
		c.logs.hostDropped++
		return
	}
	c.logs.hostErrors++
	r.hostErr(ctx, c.program.Name, c.tool, err)
}

// argumentsError is the refusal of a call's arguments (ErrArguments, also
// manifest.ErrCostly when their check would take too many steps), or the
// deadline or cancel that their check met first.
func (r *Runtime) argumentsError(full string, err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w: checking the arguments against the tool's parameters ran past %s, the deadline of the call and its nested calls",
			full, ErrDeadline, r.limits.Deadline)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: canceled while checking the arguments: %w", full, context.Canceled)
	}
	return fmt.Errorf("%s: %w", full, err)
}

// warmError is the deadline or cancel that a call met while it waited for
// its program's snapshot.
func (r *Runtime) warmError(full string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w: _initialize, run once for the snapshot that calls start from, ran past %s before the tool started; the snapshot goes on, for %s at most, for the calls after",
			full, ErrDeadline, r.limits.Deadline, min(r.limits.Deadline, snapshotDeadline))
	}
	return fmt.Errorf("%s: canceled while waiting for the program's snapshot of _initialize: %w", full, context.Canceled)
}

func (r *Runtime) deadlineError(full string) error {
	return fmt.Errorf("%s: %w: the call and its nested calls ran past %s", full, ErrDeadline, r.limits.Deadline)
}

// nested runs berm.call for caller c. Every refusal (a target that is no
// name, undeclared, depth, no such program or tool, bad arguments, trap,
// deadline) is staged with bits 63 and 62; the callee's failure with bit 63.
func (r *Runtime) nested(ctx context.Context, c *Call, program, tool, args []byte) uint64 {
	// The names are the program's bytes, of any length: they are checked,
	// by length first, before anything copies them (a program name of
	// 127 MiB was copied into three strings and the refusal, 685 MB for
	// one call), and a refusal quotes a prefix of one that is no name.
	if shown, why := target(program, tool); why != "" {
		return c.Refuse(fmt.Sprintf("berm.call %s: refused: %s", shown, why))
	}
	p, t := string(program), string(tool)
	full := manifest.FullName(p, t)
	if !c.program.Manifest.MayCall(p, t) {
		return c.Refuse(fmt.Sprintf("berm.call %s: refused: not declared in the manifest's calls", full))
	}
	if c.depth+1 > r.maxDepth {
		return c.Refuse(fmt.Sprintf("berm.call %s: refused: call depth %d exceeds the limit of %d", full, c.depth+1, r.maxDepth))
	}
	out, err := r.call(ctx, p, t, args, c)
	switch {
	case err != nil:
		return c.Refuse("berm.call " + err.Error())
	case out.Failed:
		return c.StageError(out.Failure)
	}
	return c.Stage(out.Result)
}

// maxQuoted bounds what a message quotes of a name that is no name.
const maxQuoted = 32

// target is program.tool as a message shows it, and why it names no tool
// (or ""): a part that is no name is quoted, cut to maxQuoted bytes. It
// looks at a name's length before it copies any of it.
func target[T ~string | ~[]byte](program, tool T) (shown, why string) {
	p, pwhy := nameOf(program, manifest.MaxProgramName, validProgram,
		"1 to 63 characters of [a-z0-9-], starting with a letter or digit")
	t, twhy := nameOf(tool, manifest.MaxToolName, manifest.ValidToolName, "1 to 64 characters of [A-Za-z0-9_-]")
	switch {
	case pwhy != "":
		why = "not a program's name: " + pwhy
	case twhy != "":
		why = "not a tool's name: " + twhy
	}
	return p + "." + t, why
}

// nameOf is name as a message shows it, and why it is not valid (over
// max bytes, or not what want says), or "".
func nameOf[T ~string | ~[]byte](name T, max int, valid func(string) bool, want string) (shown, why string) {
	if len(name) > max {
		return strconv.Quote(string(name[:maxQuoted])) + "…", fmt.Sprintf("%d bytes, over %d", len(name), max)
	}
	s := string(name)
	if !valid(s) {
		return strconv.Quote(s), "want " + want
	}
	return s, ""
}

func validProgram(name string) bool { return manifest.CheckProgramName(name) == nil }
