// Package transform rewrites a module before berm compiles it, so that the
// compiled program can be stopped at its deadline for almost nothing.
//
// wazero's own way (RuntimeConfig.WithCloseOnContextDone) calls into the
// runtime at every loop header, which spills registers and makes a compute
// loop many times slower. Deadline instead adds a mutable global the host
// sets when the deadline passes, and a test of it at every loop header and at
// the entry of every function that calls another; the test traps on
// unreachable once the global is set. A load and a branch predicted not taken
// cost a few percent.
//
//	out, err := transform.Deadline(module)
//	if err != nil {
//		// compile module as it is, on the plain path
//	}
//	mod, _ := wzRuntime.InstantiateModule(ctx, compiled(out.Module), cfg)
//	stop := mod.ExportedGlobal(out.Stop).(api.MutableGlobal)
//	context.AfterFunc(ctx, func() { stop.Set(1) })
//
// Every byte of the module but the global, export, start and code sections is
// kept as it is: no index of any function, global, type or segment moves.
package transform
