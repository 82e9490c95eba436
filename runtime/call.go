package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
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
	p, err := r.acquire(program)
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: %w", manifest.FullName(program, tool), err)
	}
	defer p.release()
	t := p.Manifest.Tool(tool)
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
	full := manifest.FullName(program, tool)
	c := &Call{rt: r, program: p, tool: tool, args: args}
	if caller != nil {
		c.depth, c.logs = caller.depth+1, caller.logs
	} else {
		c.ownLogs = logBudget{lines: r.limits.MaxLogLines, bytes: r.limits.MaxLogBytes}
		c.logs = &c.ownLogs
		defer r.logDropped(ctx, c)
	}
	if !c.mem.prepay(r, p.minMemory) {
		return Outcome{}, fmt.Errorf("%s: %w: memory: %d KiB more would pass the limit of %d KiB on all instances together",
			full, ErrHost, p.minMemory>>10, r.limits.TotalMemory>>10)
	}
	err = r.run(ctx, c, t)
	c.mem.release()
	if err != nil {
		return Outcome{}, r.hostError(ctx, full, err)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// A nested call ran out of the shared deadline and this one returned
		// before wazero noticed: it meets the same deadline.
		return Outcome{}, r.deadlineError(full)
	}
	final, what := c.result, "result"
	if c.failed {
		final, what = c.failure, "failure message"
	}
	if final.over > 0 {
		return Outcome{}, fmt.Errorf("%s: %w: %s of %d bytes, limit %d bytes",
			full, ErrLimit, what, final.over, r.limits.MaxResult)
	}
	if c.failed {
		return Outcome{Failed: true, Failure: final.b}, nil
	}
	return Outcome{Result: final.b}, nil
}

// run instantiates the program anew, runs _initialize when exported (unless
// the instance starts from its snapshot), then the tool, and closes the
// instance.
func (r *Runtime) run(ctx context.Context, c *Call, t *manifest.Tool) error {
	return r.instance(ctx, c, func(ctx context.Context, mod api.Module) error {
		_, err := mod.ExportedFunction(manifest.ToolExportPrefix + t.Name).Call(ctx)
		var exit *sys.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 0 {
			return nil // WASI proc_exit(0): the program ended, its outcome set
		}
		return err
	})
}

// instance makes a new instance of c's program, ready to run a tool, hands
// it to use and closes it.
func (r *Runtime) instance(ctx context.Context, c *Call, use func(context.Context, api.Module) error) (err error) {
	ctx = context.WithValue(ctx, callKey{}, c)
	c.mem.image = c.program.image
	ctx = experimental.WithMemoryAllocator(ctx, &c.mem)
	if c.program.resolver != nil {
		ctx = experimental.WithImportResolver(ctx, c.program.resolver)
	}
	var start time.Time
	if r.observer.Instantiate != nil {
		start = time.Now()
	}
	mod, err := c.program.wz.InstantiateModule(ctx, c.program.compiled, c.program.instanceConfig(ctx, c))
	defer c.flushOutput()
	if err != nil {
		return err
	}
	defer mod.Close(context.Background())
	if c.program.snapshotted {
		if err := c.program.restore(mod); err != nil {
			return err
		}
	} else if c.program.Manifest.Initialize {
		c.initializing = true
		if _, err := mod.ExportedFunction("_initialize").Call(ctx); err != nil {
			return fmt.Errorf("_initialize: %w", err)
		}
		c.initializing = false
	}
	if r.observer.Instantiate != nil {
		r.observer.Instantiate(c.program.Name, time.Since(start))
	}
	return use(ctx, mod)
}

// hostError turns what wazero returned into the host's error.
func (r *Runtime) hostError(ctx context.Context, full string, err error) error {
	var exit *sys.ExitError
	switch {
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
