// Package runtime deploys berm programs and calls their tools: each program
// is compiled once (the compiled code cached on disk, content-addressed and
// shared by every process naming the same directory) and instantiated anew
// for every call.
//
// A program reaches the world only through the syscalls it is linked with.
// The runtime ships the core syscalls of ABI.md; an embedder adds its own host
// syscalls (linked only into programs whose manifests declare them) and its
// tables for other import modules (WASI, say). Anything else a program calls
// traps, because nothing is registered for it.
//
//	rt, err := runtime.New(ctx, runtime.Config{Syscalls: hostSyscalls})
//	defer rt.Close(ctx)
//	_, err = rt.Deploy(ctx, "example", image, nil)
//	out, err := rt.Call(ctx, "example", "echo", []byte(`{"query":"hello"}`))
//	switch {
//	case err != nil: // the host's: no such tool, bad arguments, a trap, the deadline,
//		// or the host's own failure (ErrHost)
//	case out.Failed: // the program's own failure, which a model should see
//	default: // out.Result
//	}
//
// Each instance's memory is bounded by Limits.Memory and, with all others,
// by Limits.TotalMemory; it is reserved at the limit and made resident only
// as the program touches it, so growing never copies.
//
// This package shadows the standard library's runtime; import that one as
// goruntime where both are needed.
package runtime
