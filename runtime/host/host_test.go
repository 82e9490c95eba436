package host_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/host"
	"github.com/berm-dev/berm/runtime/store"
)

// hostPath is where the failing store claims to have failed.
const hostPath = "/home/someone/.berm/data/kv/.tmp-123456"

// failingKV fails every call with err.
type failingKV struct{ err error }

func (f failingKV) Get(context.Context, string, []byte) ([]byte, bool, error) {
	return nil, false, f.err
}
func (f failingKV) Set(context.Context, string, []byte, []byte) error { return f.err }
func (f failingKV) Delete(context.Context, string, []byte) error      { return f.err }

// deployKV deploys testdata/kv.wasm as "kv" over kv, logging to log.
func deployKV(t *testing.T, kv host.KV, log *slog.Logger) *runtime.Runtime {
	t.Helper()
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.Config{
		Syscalls: host.Syscalls(kv),
		HostError: func(ctx context.Context, program, tool string, err error) {
			log.ErrorContext(ctx, "host error", "program", program, "tool", tool, "error", err)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	image, err := os.ReadFile(filepath.Join("..", "..", "testdata", "kv.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Deploy(ctx, "kv", image, nil); err != nil {
		t.Fatal(err)
	}
	return rt
}

// TestSetRefusal: what berm.set's refusal tells the program names no host
// path; the log has the whole error.
func TestSetRefusal(t *testing.T) {
	pathErr := func(errno syscall.Errno) error {
		return fmt.Errorf("data of kv: %w", &fs.PathError{Op: "write", Path: hostPath, Err: errno})
	}
	for _, tc := range []struct {
		name, want string
		err        error
		logged     bool
	}{
		{"io", "refused:berm.set: host error", pathErr(syscall.EIO), true},
		{"no space", "refused:berm.set: the host could not store the value: no space left", pathErr(syscall.ENOSPC), true},
		{"disk quota", "refused:berm.set: the host could not store the value: no space left", pathErr(syscall.EDQUOT), true},
		{"file size limit", "refused:berm.set: the host could not store the value: no space left", pathErr(syscall.EFBIG), true},
		{"unavailable", "refused:berm.set: host error: the program's data is unavailable now",
			fmt.Errorf("%w: %w", store.ErrUnavailable, pathErr(syscall.ECONNREFUSED)), true},
		{"quota", "refused:berm.set: data of kv would be 67112960 bytes on disk, over the limit of 67108864 bytes: over the data quota",
			fmt.Errorf("data of kv would be 67112960 bytes on disk, over the limit of 67108864 bytes: %w", store.ErrQuota), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			rt := deployKV(t, failingKV{tc.err}, slog.New(slog.NewTextHandler(&log, nil)))
			out, err := rt.Call(context.Background(), "kv", "set", []byte(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			if string(out.Result) != tc.want {
				t.Errorf("the program read %q, want %q", out.Result, tc.want)
			}
			if strings.Contains(string(out.Result), "/") {
				t.Errorf("the program read a path: %q", out.Result)
			}
			if got := strings.Contains(log.String(), hostPath) && strings.Contains(log.String(), "program=kv"); got != tc.logged {
				t.Errorf("logged %v, want %v: %s", got, tc.logged, log.String())
			}
		})
	}
}

// TestGetDeleteHostError: a store's failure under berm.get or berm.delete
// traps with ErrHost and no host path; the log has the whole error.
func TestGetDeleteHostError(t *testing.T) {
	for _, tool := range []string{"get", "delete"} {
		t.Run(tool, func(t *testing.T) {
			var log bytes.Buffer
			kv := failingKV{&fs.PathError{Op: "open", Path: hostPath, Err: syscall.EACCES}}
			rt := deployKV(t, kv, slog.New(slog.NewTextHandler(&log, nil)))
			_, err := rt.Call(context.Background(), "kv", tool, []byte(`{}`))
			if !errors.Is(err, runtime.ErrTrap) {
				t.Fatalf("%s: %v, want ErrTrap", tool, err)
			}
			if strings.Contains(err.Error(), hostPath) {
				t.Errorf("the trap names a host path: %v", err)
			}
			if !strings.Contains(log.String(), hostPath) || !strings.Contains(log.String(), "program=kv") {
				t.Errorf("the log lacks the error: %s", log.String())
			}
		})
	}
}

// TestGetUnavailable: a store that cannot be reached (a database down) traps
// berm.get with a host error that says the data is unavailable, and names
// nothing of the host.
func TestGetUnavailable(t *testing.T) {
	var log bytes.Buffer
	kv := failingKV{fmt.Errorf("data of kv: postgres at db.internal:5432: %w: connection refused", store.ErrUnavailable)}
	rt := deployKV(t, kv, slog.New(slog.NewTextHandler(&log, nil)))
	_, err := rt.Call(context.Background(), "kv", "get", []byte(`{}`))
	if !errors.Is(err, host.ErrHost) || !strings.Contains(err.Error(), "data is unavailable") {
		t.Fatalf("get: %v, want ErrHost saying the data is unavailable", err)
	}
	if strings.Contains(err.Error(), "db.internal") {
		t.Errorf("the error names the database: %v", err)
	}
	if !strings.Contains(log.String(), "db.internal") {
		t.Errorf("the log lacks the error: %s", log.String())
	}
}

// TestSyscallsStore: over a real store, with no logger.
func TestSyscallsStore(t *testing.T) {
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rt := deployKV(t, st, nil)
	ctx := context.Background()
	for _, step := range []struct{ tool, args, want string }{
		{"get", `{}`, "absent"},
		{"set", `{"v":1}`, "set"},
		{"get", `{}`, `{"v":1}`},
		{"delete", `{}`, "deleted"},
		{"get", `{}`, "absent"},
	} {
		out, err := rt.Call(ctx, "kv", step.tool, []byte(step.args))
		if err != nil || string(out.Result) != step.want {
			t.Fatalf("%s = %q, %v; want %q", step.tool, out.Result, err, step.want)
		}
	}
}

// keysKV records the longest key it was asked for, and holds none.
type keysKV struct{ longest *int }

func (k keysKV) saw(key []byte) { *k.longest = max(*k.longest, len(key)) }
func (k keysKV) Get(_ context.Context, _ string, key []byte) ([]byte, bool, error) {
	k.saw(key)
	return nil, false, nil
}
func (k keysKV) Set(_ context.Context, _ string, key, _ []byte) error { k.saw(key); return nil }
func (k keysKV) Delete(_ context.Context, _ string, key []byte) error { k.saw(key); return nil }

// TestLongKey: berm.get and berm.delete of a key over store.MaxKey, which
// no store can hold, answer absent and done without handing the key to
// the store (which hashed, or sent to PostgreSQL, the whole of a key of
// 1 MiB); a key at the bound still reaches it.
func TestLongKey(t *testing.T) {
	for _, tc := range []struct {
		tool, want string
		n          int
		stored     int // the longest key the store saw
	}{
		{"get", "absent", store.MaxKey, store.MaxKey},
		{"get", "absent", store.MaxKey + 1, 0},
		{"get", "absent", 1 << 20, 0},
		{"delete", "deleted", store.MaxKey, store.MaxKey},
		{"delete", "deleted", 1 << 20, 0},
	} {
		t.Run(fmt.Sprintf("%s %d", tc.tool, tc.n), func(t *testing.T) {
			ctx := context.Background()
			var longest int
			rt, err := runtime.New(ctx, runtime.Config{Syscalls: host.Syscalls(keysKV{&longest})})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close(ctx)
			image, err := os.ReadFile(filepath.Join("testdata", "kvkey.wasm"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rt.Deploy(ctx, "kvkey", image, nil); err != nil {
				t.Fatal(err)
			}
			key := `{"k":"` + strings.Repeat("x", tc.n-8) + `"}`
			out, err := rt.Call(ctx, "kvkey", tc.tool, []byte(key))
			if err != nil || string(out.Result) != tc.want {
				t.Fatalf("%s = %q, %v; want %q", tc.tool, out.Result, err, tc.want)
			}
			if longest != tc.stored {
				t.Errorf("the store saw a key of %d bytes, want %d", longest, tc.stored)
			}
		})
	}
}
