package runtime

import (
	"context"
	"strings"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// A program may loop on a host function and never reach a place the
// deadline's count or wazero's check looks at: random_get of 1 MB, fd_write
// of 63 MB, again and again, ran 25 s past a deadline of 300 ms. So every
// function of every host module (WASI, Options.Imports, and the modules link
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
// wasi is set for WASI's, whose watched functions (watchedWASI) also mark the
// call's instance changed.
type hostListeners struct {
	r    *Runtime
	wasi bool
}

func (f hostListeners) NewFunctionListener(def api.FunctionDefinition) experimental.FunctionListener {
	l := &hostListener{r: f.r}
	if names := def.ExportNames(); f.wasi && len(names) > 0 {
		l.changes = watchedWASI[names[0]]
		l.descriptor = takesDescriptor(names[0])
	}
	return l
}

// hostListener checks a call's end before each host function runs.
type hostListener struct {
	r          *Runtime
	changes    bool // a watched WASI function: see Call.wasiChanged
	descriptor bool // a WASI function whose first parameter is a descriptor
}

// Before notes a WASI function about to run on a descriptor past the
// standard streams, for After.
func (l *hostListener) Before(ctx context.Context, _ api.Module, _ api.FunctionDefinition, params []uint64, _ experimental.StackIterator) {
	l.r.checkRunning(ctx)
	if l.descriptor && len(params) > 0 && uint32(params[0]) > 2 {
		if c, _ := ctx.Value(callKey{}).(*Call); c != nil {
			c.wasiDescriptor = true
		}
	}
}

// takesDescriptor reports whether the WASI function name's first parameter
// is a descriptor that it may open or change, which is all but the
// preopens' names.
func takesDescriptor(name string) bool {
	switch {
	case name == "fd_prestat_get", name == "fd_prestat_dir_name":
		return false
	case strings.HasPrefix(name, "fd_"), strings.HasPrefix(name, "path_"), strings.HasPrefix(name, "sock_"):
		return true
	}
	return false
}

// After marks the call's instance changed:
//   - after a function on a descriptor past the standard streams, unless
//     the descriptor is not there (EBADF), whatever else comes of it:
//     wazero opens a granted directory at the first touch of its
//     descriptor, which an idle instance would then hold of the
//     directory's open files, and a function may change a descriptor
//     before it fails (fd_readdir moves its cursor, then faults writing the
//     entries). The preopens' names are read without opening them, as Go's
//     and wasi-libc's initialization do;
//   - after a watched function that succeeded (errno 0) on a standard
//     stream, where one that failed changed nothing. Go's runtime, at init,
//     asks for non-blocking standard streams (fd_fdstat_set_flags on 0, 1
//     and 2), which berm's streams refuse with ENOSYS; counting the attempt
//     would cost every Go program its snapshot and its pooled instances.
func (l *hostListener) After(ctx context.Context, _ api.Module, _ api.FunctionDefinition, results []uint64) {
	if !l.changes && !l.descriptor {
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
	if l.changes && errno == 0 {
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

// watchedWASI are the WASI functions that change what an instance holds
// outside its memory and globals: its table of descriptors (opened, closed,
// renumbered), a descriptor's position, flags or directory cursor, what is
// left of standard input. An instance in which a call used one is not
// reused. The rest read that state, or change only the host's files, which
// outlive calls by design (a granted directory).
var watchedWASI = map[string]bool{
	"path_open": true, "fd_close": true, "fd_renumber": true,
	"fd_seek": true, "fd_read": true, "fd_pread": true, "fd_readdir": true,
	"fd_fdstat_set_flags": true, "fd_fdstat_set_rights": true,
	"sock_accept": true, "sock_recv": true, "sock_send": true, "sock_shutdown": true,
	"proc_exit": true, "proc_raise": true,
}
