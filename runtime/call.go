package runtime

import (
	"context"
	"errors"
	"fmt"

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
	// A program's first call takes its snapshot (Program.Warm), bounded on
	// its own: not out of this call's deadline, which on the plain path
	// would have been all the call's.
	if p := r.Program(program); p != nil {
		p.Warm(context.WithoutCancel(ctx))
	}
	ctx, cancel := context.WithTimeout(ctx, r.limits.Deadline)
	defer cancel()
	return r.call(ctx, program, tool, args, nil)
}

// call runs a top-level call (caller nil) or one nested in caller's.
func (r *Runtime) call(ctx context.Context, program, tool string, args []byte, caller *Call) (Outcome, error) {
	r.running.Add(1)
	defer r.running.Add(-1)
	p, err := r.acquire(program)
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: %w", manifest.FullName(program, tool), err)
	}
	defer p.release()
	i, t := p.tool(tool)
	if t == nil {
		return Outcome{}, fmt.Errorf("%s: %w", manifest.FullName(program, tool), ErrNoTool)
	}
	if len(args) > r.limits.MaxArgs {
		// The caller's error (ErrArguments), and a size limit (ErrLimit).
		return Outcome{}, fmt.Errorf("%s: %w: %w: %d bytes, limit %d bytes",
			manifest.FullName(program, tool), ErrArguments, ErrLimit, len(args), r.limits.MaxArgs)
	}
	if err := t.Validate(args); err != nil {
		return Outcome{}, fmt.Errorf("%s: %w", manifest.FullName(program, tool), err)
	}
	// The first call takes the snapshot, and those that arrive meanwhile
	// wait for it. Not under this call's deadline or cancel: what one
	// caller gives up on must not refuse the snapshot for every call after.
	p.Warm(context.WithoutCancel(ctx))
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
		return Outcome{}, fmt.Errorf("%s: %w: memory: %d KiB more would pass the limit of %d KiB on all instances together",
			manifest.FullName(program, tool), ErrHost, p.minMemory>>10, r.limits.TotalMemory>>10)
	}
	if err := r.run(ctx, c, i); err != nil {
		return Outcome{}, r.hostError(ctx, manifest.FullName(program, tool), err)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// A nested call ran out of the shared deadline and this one returned
		// before wazero noticed: it meets the same deadline.
		return Outcome{}, r.deadlineError(manifest.FullName(program, tool))
	}
	final, what := c.result, "result"
	if c.failed {
		final, what = c.failure, "failure message"
	}
	if final.over > 0 {
		return Outcome{}, fmt.Errorf("%s: %w: %s of %d bytes, limit %d bytes",
			manifest.FullName(program, tool), ErrLimit, what, final.over, r.limits.MaxResult)
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

// hostError turns what wazero returned into the host's error.
func (r *Runtime) hostError(ctx context.Context, full string, err error) error {
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
	case errors.As(err, &exit):
		return fmt.Errorf("%s: %w: it exited with code %d", full, ErrTrap, exit.ExitCode())
	}
	// The message without wazero's stack trace, the chain as it was: a
	// syscall's host error stays ErrHost too.
	return fmt.Errorf("%s: %w: %w", full, ErrTrap, &trimmed{firstLine(err), err})
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
// Options.HostError: a program retrying a failing berm.set in a loop would
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

func (r *Runtime) deadlineError(full string) error {
	return fmt.Errorf("%s: %w: the call and its nested calls ran past %s", full, ErrDeadline, r.limits.Deadline)
}

// nested runs berm.call for caller c. Every refusal (undeclared target, depth,
// no such program or tool, bad arguments, trap, deadline) is staged with bits
// 63 and 62; the callee's failure with bit 63.
func (r *Runtime) nested(ctx context.Context, c *Call, program, tool string, args []byte) uint64 {
	full := manifest.FullName(program, tool)
	if !c.program.Manifest.MayCall(program, tool) {
		return c.Refuse(fmt.Sprintf("berm.call %s: refused: not declared in the manifest's calls", full))
	}
	if c.depth+1 > r.maxDepth {
		return c.Refuse(fmt.Sprintf("berm.call %s: refused: call depth %d exceeds the limit of %d", full, c.depth+1, r.maxDepth))
	}
	out, err := r.call(ctx, program, tool, args, c)
	switch {
	case err != nil:
		return c.Refuse("berm.call " + err.Error())
	case out.Failed:
		return c.StageError(out.Failure)
	}
	return c.Stage(out.Result)
}
