// Package transform rewrites a module before berm compiles it, so that the
// compiled program can be stopped at its deadline for almost nothing.
//
// wazero's own way (RuntimeConfig.WithCloseOnContextDone) leaves compiled
// code for Go at every loop header, which makes a compute loop many times
// slower. Deadline instead counts loop headers, function entries and bulk
// operations down in a global, and every Period turns calls the function it
// imports, berm.deadline (TickModule, TickName), which the host provides: it
// checks the call's deadline and yields the goroutine, which compiled code
// cannot be made to do otherwise. A decrement and a branch predicted not
// taken cost a few percent. Each count weighs what it stands for (bytes of
// code, loads and stores, slow instructions, calls, bytes filled or
// copied), so that a turn is a microsecond or so of work whatever its
// instructions; and a memory.fill, memory.copy or memory.init longer than
// BulkChunk, which as one instruction no count before it could stop, runs
// BulkChunk bytes at a time in a function the rewrite adds, counted
// between.
//
//	out, err := transform.Deadline(module)
//	if err != nil {
//		// compile module as it is, on the plain path
//	}
//	// The host module berm exports "deadline", a func() that panics when
//	// the call's context is done.
//	compiled, err := wzRuntime.CompileModule(ctx, out)
//
// The import comes after the module's own, so every function the module
// defines moves up by one index, and every place that names one is
// rewritten; no index of a global, type, table or segment moves.
package transform
