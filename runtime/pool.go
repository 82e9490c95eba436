package runtime

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berm-dev/berm/runtime/internal/transform"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"
)

// Instances are reset, not made anew. A program whose whole state is memory
// and its mutable globals (snapshot.go: no start function, no table written,
// no segment dropped, no environment read at each call, no _initialize at
// each call) keeps a few idle instances. A call takes one, and when it ends
// well the instance goes back as it started: its memory laid over with the
// image again, its mutable globals set to their first values. Instantiating
// costs more than the call of a small tool, and a Go program's first call in
// an instance several times its second: wazero fills its table of a few
// thousand functions, and Go's runtime warms its caches.
//
// What cannot be put back is discarded instead, and the next call gets a new
// instance: one whose call failed in any way (a trap, the deadline, a cancel,
// proc_exit, the host's error), whose memory grew, or that called a WASI
// function which may change what the instance holds outside its memory (an
// open file, a seek, a renumbered or closed descriptor, a directory opened
// at its first touch: listen.go), which wazero keeps inside the instance and
// does not show. So no call can observe
// anything an earlier one left, as ABI.md's "One call" asks.
//
// An idle instance gives its memory back to Limits.TotalMemory, which counts
// the instances of calls; what it still holds of its own is small: a copied
// image (under mapImageFrom, 256 KiB), the region's kept prefix (keptPrefix,
// 64 KiB) or a settled tail past the image (settleTail, 256 KiB); a mapped
// image's pages are the memory file's, shared; every other page a call
// touched is dropped at its reset (linearMemory.reset); and what wazero
// built for it beside its memory (Program.held), which a reset keeps: at
// most maxIdleHeld, since a program whose instances hold more is not
// pooled. There are at most maxIdle of them per program. Which pages are
// present, and which its own, is as in a new instance whatever earlier
// calls touched: no call can learn that by timing its accesses.

// maxIdle bounds the idle instances of one program: enough for every core
// to find one, and a nested call besides.
var maxIdle = 2 * goruntime.GOMAXPROCS(0)

// maxIdleHeld bounds what an idle instance holds beside its memory, which
// no limit counts while it is idle: four times a Go program's (250 to 280
// KiB). Instances that hold more, up to the 18 MiB the bounds allow
// (instanceHeld), serve one call each, made anew in milliseconds.
const maxIdleHeld = 1 << 20

// instance is one instance of a program, ready to run its tools.
type instance struct {
	mod api.Module
	fns []api.Function // by tool index, looked up at first use: each holds its call stack
	mem callMemory
	// globals are the mutable globals, values their values when the
	// instance was new; size is memory's size then.
	globals []api.MutableGlobal
	values  []uint64
	size    uint32
	// stdout and stderr write to the log of the call running; sleeper ends
	// a WASI sleep with that call's context.
	stdout, stderr *logWriter
	sleeper        *sleeper
	pool           *instancePool // nil: closed after its call
}

// sleeper is an instance's WASI sleep, which ends with the running call.
type sleeper struct{ ctx context.Context }

func (s *sleeper) sleep(ns int64) { sleep(s.ctx, ns) }

// instancePool holds the idle instances of one program.
type instancePool struct {
	regions *regionPool // which closes it with the runtime
	mu      sync.Mutex
	idle    []*instance
	closed  bool
	// reused counts the calls that ran in an instance reset, for tests.
	reused atomic.Int64
}

func (p *instancePool) get() *instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.idle)
	if n == 0 {
		return nil
	}
	inst := p.idle[n-1]
	p.idle[n-1] = nil
	p.idle = p.idle[:n-1]
	return inst
}

// put keeps inst, reset, or closes it when the pool is full or closed.
func (p *instancePool) put(inst *instance) {
	p.mu.Lock()
	if !p.closed && len(p.idle) < maxIdle {
		p.idle = append(p.idle, inst)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	inst.close()
}

// close closes the idle instances; those in use are closed when they end.
func (p *instancePool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, inst := range idle {
		inst.close()
	}
	if p.regions != nil {
		p.regions.release(p)
	}
}

// acquire returns an instance of c's program holding charge bytes of the
// budget, which Call took (p.minMemory: its memory's and what it holds
// beside, p.held): a pooled one when there is one, else a new one. A call
// past its deadline by then gets none, and gives the charge back.
func (r *Runtime) acquireInstance(ctx context.Context, c *Call, charge uint64) (*instance, error) {
	p := c.program
	if err := pastDeadline(ctx); err != nil {
		r.budget.give(charge)
		return nil, err
	}
	if p.pool != nil {
		if inst := p.pool.get(); inst != nil {
			inst.mem.charge(charge, p.held)
			p.pool.reused.Add(1)
			inst.bind(ctx, c)
			return inst, nil
		}
	}
	return r.newInstance(ctx, c, charge)
}

// newInstance instantiates c's program with charge bytes of the budget
// taken, and brings it to where calls start: the snapshot's globals and
// memory size, or _initialize run.
//
// Instantiation is counted against the call's deadline: wazero does not
// look at the context while it builds an instance (its globals, tables and
// element entries, bounded at deploy: Runtime.Check), so the instance is
// given up, and the call ends at its deadline, when that passed meanwhile.
func (r *Runtime) newInstance(ctx context.Context, c *Call, charge uint64) (*instance, error) {
	p := c.program
	inst := &instance{pool: p.pool}
	inst.mem.rt = r
	inst.mem.charge(charge, p.held)
	inst.mem.image = p.image
	if p.wasi {
		inst.sleeper = &sleeper{ctx: ctx}
		if r.log != nil {
			inst.stdout, inst.stderr = &logWriter{}, &logWriter{}
		}
	}
	inst.bind(ctx, c)
	ictx := experimental.WithMemoryAllocator(ctx, &inst.mem)
	if p.resolver != nil {
		ictx = experimental.WithImportResolver(ictx, p.resolver)
	}
	var start time.Time
	if r.observer.Instantiate != nil {
		start = time.Now()
	}
	mod, err := p.wz.InstantiateModule(ictx, p.compiled, p.instanceConfig(inst))
	if err != nil {
		inst.unbind(c)
		inst.mem.release()
		return nil, err
	}
	inst.mod = mod
	switch err = pastDeadline(ctx); {
	case err != nil:
	case p.snapshotted:
		err = p.restore(mod)
	case p.Manifest.Initialize:
		c.initializing = true
		if _, ierr := mod.ExportedFunction("_initialize").Call(ctx); ierr != nil {
			err = fmt.Errorf("%w: %w", errInitialize, ierr)
		}
		c.initializing = false
	}
	if err == nil && inst.pool != nil {
		err = inst.record(p)
	}
	if err != nil {
		inst.unbind(c)
		inst.close()
		return nil, err
	}
	if r.observer.Instantiate != nil {
		r.observer.Instantiate(p.Name, time.Since(start))
	}
	return inst, nil
}

// pastDeadline is an error when ctx's deadline has passed: wazero's, as it
// stops a call at its deadline, for hostError to say so. It reads the
// clock, not only ctx.Err, which is set when the deadline's timer fires,
// late on a loaded machine. A cancel is left to the tool's first check of
// the context, as before: the caller has gone, and the tool stops within a
// tick (isolation_attack_test.go's probe runs a tool under a context
// cancelled from its start).
func pastDeadline(ctx context.Context) error {
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return sys.NewExitError(sys.ExitCodeDeadlineExceeded)
	}
	return nil
}

// record notes what inst starts as, which reset puts back: its memory, the
// program's mutable globals, and the deadline's counter (when the program
// was compiled with it), whose value one call leaves would tell the next
// when its first tick falls.
func (inst *instance) record(p *Program) error {
	inst.size = inst.mod.Memory().Size()
	inst.mem.first.settle(p.image)
	inst.globals = make([]api.MutableGlobal, 0, len(p.globals)+1)
	inst.values = make([]uint64, 0, len(p.globals)+1)
	for _, g := range p.globals {
		mg, ok := inst.mod.ExportedGlobal(g.Name).(api.MutableGlobal)
		if !ok {
			return fmt.Errorf("%w: global %s: not exported mutable", ErrHost, g.Name)
		}
		inst.globals, inst.values = append(inst.globals, mg), append(inst.values, mg.Get())
	}
	if mg, ok := inst.mod.ExportedGlobal(transform.CounterExport).(api.MutableGlobal); ok {
		inst.globals, inst.values = append(inst.globals, mg), append(inst.values, mg.Get())
	}
	return nil
}

// bind makes inst's output and sleep the call c's.
func (inst *instance) bind(ctx context.Context, c *Call) {
	if inst.sleeper != nil {
		inst.sleeper.ctx = ctx
	}
	if inst.stdout != nil {
		inst.stdout.ctx, inst.stdout.c = ctx, c
		inst.stderr.ctx, inst.stderr.c = ctx, c
		c.stdout, c.stderr = inst.stdout, inst.stderr
	}
}

// unbind ends what bind began, once the call's output is flushed.
func (inst *instance) unbind(c *Call) {
	c.flushOutput()
	if inst.sleeper != nil {
		inst.sleeper.ctx = context.Background()
	}
	if inst.stdout != nil {
		*inst.stdout = logWriter{partial: inst.stdout.partial[:0]}
		*inst.stderr = logWriter{partial: inst.stderr.partial[:0]}
	}
}

// tool returns the function of the tool at index i of the manifest.
func (inst *instance) tool(p *Program, i int) api.Function {
	if inst.fns == nil {
		inst.fns = make([]api.Function, len(p.exports))
	}
	if inst.fns[i] == nil {
		inst.fns[i] = inst.mod.ExportedFunction(p.exports[i])
	}
	return inst.fns[i]
}

// releaseInstance ends c's use of inst: back to its pool, reset, when the
// call went well and nothing it did is beyond a reset; closed otherwise.
func (r *Runtime) releaseInstance(c *Call, inst *instance, ok bool) {
	inst.unbind(c)
	pool := inst.pool
	if pool == nil {
		inst.close()
		return
	}
	if c.wasiChanged || !ok || inst.mod.IsClosed() || !inst.reset(c.program) {
		inst.close()
		return
	}
	pool.put(inst)
}

// reset puts inst back as it started; false when it cannot be.
func (inst *instance) reset(p *Program) bool {
	if inst.mod.Memory().Size() != inst.size {
		return false
	}
	if !inst.mem.first.reset(inst.mem.rt, p.image) {
		return false
	}
	for i, g := range inst.globals {
		g.Set(inst.values[i])
	}
	// Its memory, and what it holds beside, are the budget's again when a
	// call takes it.
	r := inst.mem.rt
	r.budget.give(inst.mem.first.charged + inst.mem.held)
	inst.mem.first.charged, inst.mem.held = 0, 0
	return true
}

func (inst *instance) close() {
	if inst.mod != nil {
		inst.mod.Close(context.Background())
	}
	inst.mem.release()
}
