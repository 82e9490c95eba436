package runtime

import (
	"context"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// A program may loop on a host function and never reach a place the
// deadline's count or wazero's check looks at: random_get of 1 MB, fd_write
// of 63 MB, again and again, ran 25 s past a deadline of 300 ms. So every
// function of every host module (WASI, Config.Imports, and the modules link
// makes) is compiled with hostListener, which traps once the call's context
// is done or the runtime is closing, before the function runs. berm's own
// module checks the same in its functions (dispatch, tick).
//
// wazero calls a listener only around host functions here, and what it costs
// is a few tens of nanoseconds a host call: a WASI call costs more itself
// (measured in BenchmarkWarmGo, BenchmarkWarmEcho and BenchmarkWASICalls).

// listen returns ctx with hostListener's factory in it: the context to
// compile the host module named module in.
func (r *Runtime) listen(ctx context.Context, module string) context.Context {
	return experimental.WithFunctionListenerFactory(ctx, hostListeners{r: r, wasi: module == wasiModule})
}

// hostListeners makes a hostListener for each function of a host module;
// wasi is set for WASI's, whose rules (wasi_rules.go) bound what a call may
// ask for and mark the call's instance changed.
type hostListeners struct {
	r    *Runtime
	wasi bool
}

func (f hostListeners) NewFunctionListener(def api.FunctionDefinition) experimental.FunctionListener {
	l := &hostListener{r: f.r}
	if f.wasi {
		l.wasi = wasiRuleOf(def)
	}
	return l
}

// hostListener checks a call's end before each host function runs.
type hostListener struct {
	r    *Runtime
	wasi *wasiRule // nil but for WASI's functions
}

// Before traps past a WASI function's bounds, notes one about to run on a
// descriptor past the standard streams, for After, and logs a path outside
// every grant.
func (l *hostListener) Before(ctx context.Context, mod api.Module, _ api.FunctionDefinition, params []uint64, _ experimental.StackIterator) {
	l.r.checkRunning(ctx)
	rule := l.wasi
	if rule == nil {
		return
	}
	rule.check(params)
	if rule.reads {
		return
	}
	var c *Call
	for k, i := range rule.fds {
		fd := uint32(params[i])
		if fd <= 2 {
			continue
		}
		if c == nil {
			if c, _ = ctx.Value(callKey{}).(*Call); c == nil {
				return
			}
		}
		c.wasiDescriptor = true
		if j := rule.paths[k]; j > 0 && int32(fd) < 0 {
			// Go's os names a path outside every preopen so (wasi_fs.go).
			if path, ok := mod.Memory().Read(uint32(params[j-1]), uint32(params[j])); ok {
				c.notGranted(ctx, rule.op, path)
			}
		}
	}
}

// After marks the call's instance changed:
//   - after a function on a descriptor past the standard streams, whichever
//     parameter names it, unless the descriptor is not there (EBADF),
//     whatever else comes of it: wazero opens a granted directory at the
//     first touch of its descriptor, which an idle instance would then hold
//     of the directory's open files, and a function may change a
//     descriptor before it fails (fd_readdir moves its cursor, then faults
//     writing the entries). A function that only reads a descriptor's
//     name or status (wasiReads) changes nothing;
//   - after any other function that succeeded (errno 0) but the harmless
//     ones (wasiHarmless), where one that failed changed nothing. Go's
//     runtime, at init, asks for non-blocking standard streams
//     (fd_fdstat_set_flags on 0, 1 and 2), which berm's streams refuse with
//     ENOSYS; counting the attempt would cost every Go program its snapshot
//     and its pooled instances.
func (l *hostListener) After(ctx context.Context, _ api.Module, _ api.FunctionDefinition, results []uint64) {
	rule := l.wasi
	if rule == nil || rule.harmless && len(rule.fds) == 0 {
		return
	}
	c, _ := ctx.Value(callKey{}).(*Call)
	if c == nil {
		return
	}
	errno := uint64(0)
	if len(results) > 0 {
		errno = results[0]
	}
	if c.wasiDescriptor {
		c.wasiDescriptor = false
		if errno != errnoBADF {
			c.wasiChanged = true
		}
		return
	}
	if !rule.harmless && errno == 0 {
		c.wasiChanged = true
	}
}

// errnoBADF is WASI's EBADF: no such descriptor.
const errnoBADF = 8

func (*hostListener) Abort(context.Context, api.Module, api.FunctionDefinition, error) {}

// checkRunning traps (panics, as a host function does to trap) once the
// call's context is done or the runtime is closing.
func (r *Runtime) checkRunning(ctx context.Context) {
	if err := ctx.Err(); err != nil {
		panic(&trap{msg: "the call's context is done", err: err})
	}
	if r.closing.Load() {
		panic(&trap{msg: "the runtime is closing", err: ErrClosed})
	}
}
