// Package transform rewrites a module before berm compiles it, so that the
// compiled program can be stopped at its deadline for almost nothing.
//
// wazero's own way (RuntimeConfig.WithCloseOnContextDone) leaves compiled
// code for Go at every loop header, which makes a compute loop many times
// slower. Deadline instead counts loop headers and function entries down in a
// global, and every Period of them ticks: it leaves for Go once (so that the
// goroutine can be preempted, which compiled code cannot be) and traps on
// unreachable when the host has set the stop global it adds. A decrement and
// a branch predicted not taken cost a few percent.
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
