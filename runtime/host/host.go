// Package host is the berm binary's own host: the syscalls beyond the core
// ABI that it offers programs (berm.now, and berm.get, berm.set, berm.delete
// on each program's own data) and the WASI table it links them against.
// Embedders of the runtime choose their own; only the binary wires this one:
//
//	rt, err := runtime.New(ctx, runtime.DefaultCallDepth, host.Syscalls(st), &runtime.Options{
//		Imports:      []runtime.HostModule{host.WASI()},
//		ModuleConfig: host.ModuleConfig(),
//	})
package host

import (
	"context"
	"crypto/rand"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/berm-dev/berm/runtime"
)

// KV is the programs' data, keyed by deployed name: runtime/store's Store.
type KV interface {
	Get(program string, key []byte) ([]byte, bool, error)
	Set(program string, key, value []byte) error
	Delete(program string, key []byte) error
}

// Host syscall names (ABI.md, Host syscalls of the berm binary).
const (
	SysNow    = "berm.now"
	SysGet    = "berm.get"
	SysSet    = "berm.set"
	SysDelete = "berm.delete"
)

// Syscalls returns the binary's host syscalls over kv. A program reaches
// each only when its manifest declares it.
func Syscalls(kv KV) []runtime.Syscall {
	return []runtime.Syscall{
		{Name: SysNow, Input: runtime.Unused, Func: func(context.Context, *runtime.Call, [][]byte) (uint64, error) {
			return uint64(time.Now().UnixMilli()), nil
		}},
		{Name: SysGet, Input: runtime.Raw, Func: func(_ context.Context, c *runtime.Call, in [][]byte) (uint64, error) {
			value, ok, err := kv.Get(c.Program(), in[0])
			if err != nil {
				return 0, err
			}
			if !ok {
				return c.StageError(nil), nil
			}
			return c.Stage(value), nil
		}},
		{Name: SysSet, Input: runtime.Framed(2), Func: func(_ context.Context, c *runtime.Call, in [][]byte) (uint64, error) {
			// Any refusal, the quota or a full disk, is the program's to
			// handle: it is staged, not trapped.
			if err := kv.Set(c.Program(), in[0], in[1]); err != nil {
				return c.Refuse("berm.set: " + err.Error()), nil
			}
			return 0, nil
		}},
		{Name: SysDelete, Input: runtime.Raw, Func: func(_ context.Context, c *runtime.Call, in [][]byte) (uint64, error) {
			return 0, kv.Delete(c.Program(), in[0])
		}},
	}
}

// WASI is the WASI preview 1 table. Programs get no files, no environment
// and no arguments through it: only clocks, randomness and discarded stdio.
func WASI() runtime.HostModule {
	return runtime.HostModule{
		Name: wasi_snapshot_preview1.ModuleName,
		Export: func(b wazero.HostModuleBuilder) {
			wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
		},
	}
}

// ModuleConfig gives WASI programs real clocks and fresh randomness.
func ModuleConfig() wazero.ModuleConfig {
	return wazero.NewModuleConfig().
		WithSysWalltime().
		WithSysNanotime().
		WithSysNanosleep().
		WithRandSource(rand.Reader)
}
