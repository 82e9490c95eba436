// Package host is the berm binary's own host: the syscalls beyond the core
// ABI that it offers programs (berm.now; berm.get, berm.set, berm.delete on
// each program's own data; berm.http to the hosts a deployment grants, see
// HTTP) and the WASI table it links them against.
// Embedders of the runtime choose their own; only the binary wires this one:
//
//	rt, err := runtime.New(ctx, runtime.Config{
//		Syscalls:     host.Syscalls(st),
//		Imports:      []runtime.HostModule{host.WASI()},
//		ModuleConfig: host.ModuleConfig(),
//	})
//
// A program learns nothing of the host's file system through them: a quota
// refusal keeps its message (the store's have no paths), any other error of
// the store reaches the program as a message of its own (no space left, or
// host error) and goes whole to the logger. Each store operation takes the
// call's context, so that a wait in the store (a lock another writer holds)
// ends at the call's deadline, and the call with it (runtime.ErrDeadline).
package host
