package host

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/sandbox"
	"github.com/berm-dev/berm/runtime/store"
)

// KV is the programs' data, keyed by deployed name: runtime/store's State.
// ctx is the call's: a KV stops waiting when it is done. An error of Set that
// wraps store.ErrQuota is a refusal whose message the program reads; every
// other error is the host's, which it does not. A key over store.MaxKey,
// which Set refuses, is never looked up or deleted: it is absent.
type KV interface {
	Get(ctx context.Context, program string, key []byte) ([]byte, bool, error)
	Set(ctx context.Context, program string, key, value []byte) error
	Delete(ctx context.Context, program string, key []byte) error
}

// Host syscall names (ABI.md, Host syscalls of the berm binary).
const (
	SysNow    = "berm.now"
	SysGet    = "berm.get"
	SysSet    = sandbox.SysSet
	SysDelete = sandbox.SysDelete
)

// ErrHost is what berm.get and berm.delete return (and so trap with) when the
// store fails: the store's own error, which names host paths, goes to the
// logger only.
var ErrHost = runtime.ErrHost

// errDataUnavailable is the host error of a store that could not be reached
// (store.ErrUnavailable: a database down), which the program and its caller
// are told in those words: the call may succeed later.
var errDataUnavailable = fmt.Errorf("%w: the program's data is unavailable now", ErrHost)

// hostError is what a program is shown of a store's failure err.
func hostError(err error) error {
	if errors.Is(err, store.ErrUnavailable) {
		return errDataUnavailable
	}
	return ErrHost
}

// Syscalls returns the binary's host syscalls over kv. A program reaches
// each only when its manifest declares it. The errors of kv that a program
// is not shown go to the runtime's Config.HostError, a bounded number a
// call.
func Syscalls(kv KV) []runtime.Syscall {
	failed := func(ctx context.Context, c *runtime.Call, name string, err error) {
		c.HostFailed(ctx, fmt.Errorf("syscall %s: %w", name, err))
	}
	return []runtime.Syscall{
		{Name: SysNow, Input: runtime.Unused, Func: func(context.Context, *runtime.Call, [][]byte) (uint64, error) {
			return uint64(time.Now().UnixMilli()), nil
		}},
		{Name: SysGet, Input: runtime.Raw, Func: func(ctx context.Context, c *runtime.Call, in [][]byte) (uint64, error) {
			if len(in[0]) > store.MaxKey {
				// No store holds such a key (Set refuses it), and the
				// store would hash it whole, or send it to the database.
				return c.StageError(nil), nil
			}
			value, ok, err := kv.Get(ctx, c.Program(), in[0])
			if err != nil {
				if ctx.Err() != nil {
					// The call ended (its deadline, its cancel) while the
					// store waited. The store's error stops the program
					// here, goes to the operator's log, and leaves the
					// runtime to report the deadline (or cancel).
					return 0, err
				}
				failed(ctx, c, SysGet, err)
				return 0, hostError(err)
			}
			if !ok {
				return c.StageError(nil), nil
			}
			return c.Stage(value), nil
		}},
		{Name: SysSet, Input: runtime.Framed(2), Func: func(ctx context.Context, c *runtime.Call, in [][]byte) (uint64, error) {
			// Any refusal, the quota or a full disk, is the program's to
			// handle: it is staged, not trapped.
			err := kv.Set(ctx, c.Program(), in[0], in[1])
			switch {
			case err == nil:
				return 0, nil
			case ctx.Err() != nil:
				// As in berm.get: a refusal staged instead would let the
				// program run on past its deadline to the next check.
				return 0, err
			case errors.Is(err, store.ErrQuota):
				return c.Refuse(SysSet + ": " + err.Error()), nil
			}
			failed(ctx, c, SysSet, err)
			if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EFBIG) {
				return c.Refuse(SysSet + ": the host could not store the value: no space left"), nil
			}
			return c.Refuse(SysSet + ": " + hostError(err).Error()), nil
		}},
		{Name: SysDelete, Input: runtime.Raw, Func: func(ctx context.Context, c *runtime.Call, in [][]byte) (uint64, error) {
			if len(in[0]) > store.MaxKey {
				return 0, nil // absent, as in berm.get
			}
			if err := kv.Delete(ctx, c.Program(), in[0]); err != nil {
				if ctx.Err() != nil {
					return 0, err // as in berm.get
				}
				failed(ctx, c, SysDelete, err)
				return 0, hostError(err)
			}
			return 0, nil
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
