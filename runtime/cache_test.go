package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
)

// cacheEntries lists the compiled-code files under a cache directory.
func cacheEntries(t testing.TB, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "wazero-*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestCacheSharedAcrossRuntimes(t *testing.T) {
	dir := t.TempDir()
	first := newRuntime(t, &runtime.Config{CacheDir: dir})
	deploy(t, first, "echo", "echo.wasm")
	entries := cacheEntries(t, dir)
	if len(entries) != 1 {
		t.Fatalf("cache holds %v, want one entry", entries)
	}
	before, _ := os.Stat(entries[0])
	// A second runtime (as a second process would) finds the entry and
	// leaves it as it was.
	second := newRuntime(t, &runtime.Config{CacheDir: dir})
	deploy(t, second, "echo", "echo.wasm")
	after, _ := os.Stat(entries[0])
	if !after.ModTime().Equal(before.ModTime()) || len(cacheEntries(t, dir)) != 1 {
		t.Fatal("the second runtime rewrote the cache")
	}
}

func TestDamagedCacheEntryIsRecompiled(t *testing.T) {
	damages := map[string]func([]byte) []byte{
		"truncated": func(b []byte) []byte { return b[:len(b)/2] },
		"flipped":   func(b []byte) []byte { b[len(b)-10] ^= 0xff; return b },
		"empty":     func([]byte) []byte { return nil },
		"garbage":   func(b []byte) []byte { return []byte("not a compiled module at all") },
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			deploy(t, newRuntime(t, &runtime.Config{CacheDir: dir}), "core", "core.wasm")
			entries := cacheEntries(t, dir)
			if len(entries) != 1 {
				t.Fatalf("cache holds %v", entries)
			}
			good, err := os.ReadFile(entries[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(entries[0], damage(append([]byte(nil), good...)), 0o600); err != nil {
				t.Fatal(err)
			}
			rt := newRuntime(t, &runtime.Config{CacheDir: dir})
			deploy(t, rt, "core", "core.wasm")
			out, err := rt.Call(context.Background(), "core", "echo", []byte(`{"ok":true}`))
			check(t, out, err, want{result: `{"ok":true}`})
			repaired, err := os.ReadFile(entries[0])
			if err != nil || !bytes.Equal(repaired, good) {
				t.Fatalf("the entry was not rewritten: %d bytes, want the %d compiled before (%v)", len(repaired), len(good), err)
			}
			if leftovers, _ := filepath.Glob(filepath.Join(dir, "repair-*")); len(leftovers) > 0 {
				t.Errorf("repair left %v behind", leftovers)
			}
		})
	}
}

// An invalid module is still an error when a cache is in use: the repair
// path must not hide it.
func TestInvalidModuleWithCache(t *testing.T) {
	rt := newRuntime(t, &runtime.Config{CacheDir: t.TempDir()})
	// (module (memory (export "memory") 1) (func (export "berm_tool_t") <0xff>))
	bad := []byte{
		0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
		0x01, 0x04, 0x01, 0x60, 0x00, 0x00,
		0x03, 0x02, 0x01, 0x00,
		0x05, 0x03, 0x01, 0x00, 0x01,
		0x07, 0x18, 0x02,
		0x06, 'm', 'e', 'm', 'o', 'r', 'y', 0x02, 0x00,
		0x0b, 'b', 'e', 'r', 'm', '_', 't', 'o', 'o', 'l', '_', 't', 0x00, 0x00,
		0x0a, 0x04, 0x01, 0x02, 0x00, 0xff, // a body of one unknown opcode
	}
	bad = manifest.AppendSection(bad, []byte(`{"abi_version":0,"tools":[{"name":"t"}]}`))
	_, err := rt.Deploy(context.Background(), "bad", bad, nil)
	if !errors.Is(err, manifest.ErrInvalid) || errors.Is(err, runtime.ErrHost) {
		t.Fatalf("a module with broken code: %v, want ErrInvalid", err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(rt.CacheDir(), "repair-*")); len(leftovers) > 0 {
		t.Errorf("repair left %v behind", leftovers)
	}
}

// A cache whose I/O fails is the host's error, never the image's, and no
// repair is tried: the image is sound. Tests run as root, whom permissions do
// not stop, so the failures are structural: the directory of wazero's entries
// turned into a file (reading fails) or a dangling link (writing fails).
func TestCacheIOErrorIsHost(t *testing.T) {
	breaks := map[string]func(t *testing.T, versionDir string){
		"read": func(t *testing.T, versionDir string) {
			if err := os.WriteFile(versionDir, []byte("not a directory"), 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"write": func(t *testing.T, versionDir string) {
			if err := os.Symlink(filepath.Join(filepath.Dir(versionDir), "gone"), versionDir); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, breakDir := range breaks {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			rt := newRuntime(t, &runtime.Config{CacheDir: dir})
			versions, err := filepath.Glob(filepath.Join(dir, "wazero-*"))
			if err != nil || len(versions) != 1 {
				t.Fatalf("cache versions %v (%v)", versions, err)
			}
			if err := os.Remove(versions[0]); err != nil {
				t.Fatal(err)
			}
			breakDir(t, versions[0])
			_, err = rt.Deploy(context.Background(), "echo", fixture(t, "echo.wasm"), nil)
			var pathErr *fs.PathError
			if !errors.Is(err, runtime.ErrHost) || errors.Is(err, manifest.ErrInvalid) || !errors.As(err, &pathErr) {
				t.Fatalf("deploy over a broken cache: %v, want ErrHost with its *fs.PathError, not ErrInvalid", err)
			}
			t.Log(err)
			if leftovers, _ := filepath.Glob(filepath.Join(dir, "repair-*")); len(leftovers) > 0 {
				t.Errorf("an I/O error was taken for damage: repair left %v", leftovers)
			}
		})
	}
	// A cache directory that cannot be one fails New, as the host's.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := runtime.New(context.Background(), runtime.Config{CacheDir: file})
	if !errors.Is(err, runtime.ErrHost) {
		t.Fatalf("a file as the cache directory: %v, want ErrHost", err)
	}
}

// BenchmarkCompile compares the first compile of a ~3 MB Go-built module
// with a second process's start that finds it in the on-disk cache (a new
// runtime over the same directory stands for the second process).
func BenchmarkCompile(b *testing.B) {
	image, err := os.ReadFile(filepath.Join("..", "examples", "hello", "hello.wasm"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			rt, err := runtime.New(ctx, runtime.Config{CacheDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := rt.Deploy(ctx, "hello", image, nil); err != nil {
				b.Fatal(err)
			}
			rt.Close(ctx)
		}
	})
	b.Run("cached", func(b *testing.B) {
		dir := b.TempDir()
		warm, _ := runtime.New(ctx, runtime.Config{CacheDir: dir})
		if _, err := warm.Deploy(ctx, "hello", image, nil); err != nil {
			b.Fatal(err)
		}
		warm.Close(ctx)
		for b.Loop() {
			rt, err := runtime.New(ctx, runtime.Config{CacheDir: dir})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := rt.Deploy(ctx, "hello", image, nil); err != nil {
				b.Fatal(err)
			}
			rt.Close(ctx)
		}
	})
}

// TestCompileEndsWithContext: a deploy ends with its context, though
// wazero's compile looks at none: berm deploy of a 3 MB image went on for
// seconds past a SIGTERM. The compile left behind is closed when it ends,
// and Close leaves wazero to it: wazero's Close under a compile crashed the
// process (a nil map in its store). The deadlines end the deploy in the
// check's compile, the rewrite, and the compile itself.
func TestCompileEndsWithContext(t *testing.T) {
	t.Parallel()
	image, err := os.ReadFile(filepath.Join("..", "examples", "hello", "hello.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		dir      string
		deadline time.Duration
	}{{"", 20 * time.Millisecond}, {t.TempDir(), 20 * time.Millisecond}, {"", 400 * time.Millisecond},
		{t.TempDir(), 400 * time.Millisecond}, {t.TempDir(), time.Second}} {
		dir := tt.dir
		rt, err := runtime.New(context.Background(), runtime.Config{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), tt.deadline)
		_, err = rt.Deploy(ctx, "hello", image, nil)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("cache %q: Deploy past its deadline = %v, want context.DeadlineExceeded", dir, err)
		}
		if err := rt.Close(context.Background()); err != nil {
			t.Errorf("cache %q: Close: %v", dir, err)
		}
	}
}

// TestCompileAfterClose: a deploy that reaches its compile after Close is
// refused, ErrClosed: wazero's compile in a closed runtime crashed the
// process under go test -race (a server's sync deploying as it closed).
func TestCompileAfterClose(t *testing.T) {
	t.Parallel()
	rt, err := runtime.New(context.Background(), runtime.Config{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Deploy(context.Background(), "echo", fixture(t, "echo.wasm"), nil); !errors.Is(err, runtime.ErrClosed) {
		t.Fatalf("Deploy after Close = %v, want ErrClosed", err)
	}
}
