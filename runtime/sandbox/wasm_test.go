package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// wasmEnv is one wazero runtime with WASI, shared by the tests of a run:
// compiling the Go program takes seconds.
type wasmEnv struct {
	rt       wazero.Runtime
	mu       sync.Mutex
	compiled map[string]func() (wazero.CompiledModule, error)
}

var env = sync.OnceValue(func() *wasmEnv {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(true))
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	return &wasmEnv{rt: rt, compiled: map[string]func() (wazero.CompiledModule, error){}}
})

// compile compiles a module of testdata/ once per run, each apart from the
// others.
func (e *wasmEnv) compile(t testing.TB, file string) wazero.CompiledModule {
	t.Helper()
	e.mu.Lock()
	once, ok := e.compiled[file]
	if !ok {
		once = sync.OnceValues(func() (wazero.CompiledModule, error) {
			bin, err := os.ReadFile(filepath.Join("testdata", file))
			if err != nil {
				return nil, err
			}
			return e.rt.CompileModule(context.Background(), bin)
		})
		e.compiled[file] = once
	}
	e.mu.Unlock()
	c, err := once()
	if err != nil {
		t.Fatalf("compile %s: %v", file, err)
	}
	return c
}

// mountPoint is one FS at a guest path.
type mountPoint struct {
	fs    *FS
	guest string
}

// result is what a WASI command did.
type result struct {
	exit           uint32
	stdout, stderr string
	trap           error // it trapped, or failed otherwise than by exiting
}

// runWASI runs a WASI command with mounts, args (after the program's name)
// and environment, with plain wazero as the runtime would.
func runWASI(t testing.TB, c wazero.CompiledModule, mounts []mountPoint, args []string, environ map[string]string) result {
	t.Helper()
	var stdout bytes.Buffer
	r := runWASIOut(t, c, mounts, args, environ, &stdout)
	r.stdout = stdout.String()
	return r
}

// runWASIOut is runWASI writing stdout to w.
func runWASIOut(t testing.TB, c wazero.CompiledModule, mounts []mountPoint, args []string, environ map[string]string, w io.Writer) result {
	t.Helper()
	fsc := wazero.NewFSConfig()
	for _, m := range mounts {
		fsc = fsc.(sysfs.FSConfig).WithSysFSMount(m.fs, m.guest)
	}
	var stderr bytes.Buffer
	cfg := wazero.NewModuleConfig().WithName("").
		WithArgs(append([]string{"prog"}, args...)...).
		WithStdout(w).WithStderr(&stderr).
		WithFSConfig(fsc).
		WithSysWalltime().WithSysNanotime().WithSysNanosleep().WithRandSource(rand.Reader)
	for k, v := range environ {
		cfg = cfg.WithEnv(k, v)
	}
	var r result
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mod, err := env().rt.InstantiateModule(ctx, c, cfg)
	var exit *sys.ExitError
	switch {
	case errors.As(err, &exit):
		r.exit = exit.ExitCode()
	case err != nil:
		r.trap = err
	default:
		mod.Close(context.Background())
	}
	r.stderr = stderr.String()
	return r
}

// runProgram is runWASI for the test programs, which never trap.
func runProgram(t testing.TB, c wazero.CompiledModule, mounts []mountPoint, args []string) result {
	t.Helper()
	r := runWASI(t, c, mounts, args, nil)
	if r.trap != nil {
		t.Fatalf("%v: %v", args, r.trap)
	}
	return r
}

// A program is one of the three test modules, with what it is called with.
type program struct {
	file string
	// rel: paths go to the first preopen as given, not as guest paths.
	rel bool
	// ops names each operation the program's way.
	ops map[string]string
}

var programs = []program{
	{file: "fsops.wasm"},   // Go's os package
	{file: "fsops_c.wasm"}, // wasi-libc
	{file: "fsops_wat.wasm", rel: true, ops: map[string]string{
		"read": "r", "write": "w", "create": "c", "append": "a", "truncate": "T", "otrunc": "t",
		"rename": "n", "unlink": "u", "rmdir": "d", "mkdir": "m", "symlink": "s", "link": "l",
		"readlink": "k", "utimes": "x", "stat": "f",
	}},
}

// An escape is one attempt to reach outside a grant.
type escape struct {
	op string
	// args are paths relative to the grant, made guest paths for the
	// programs that take those; "/..." is absolute, "HOST/..." under the
	// test's directory on the host, "=..." given as is (a link's text, a
	// path relative to a directory opened).
	args []string
	// write: the grant is read-write (the attempt goes out through it);
	// otherwise it is read-only and nothing in it may change either.
	write bool
	// only: the programs that can express it (nil: all).
	only []string
}

var wasmEscapes = []escape{
	// Reads out: "..", links of every kind, absolute host paths, /proc.
	{op: "read", args: []string{"../outside/secret.txt"}},
	{op: "read", args: []string{"sub/../../outside/secret.txt"}},
	{op: "read", args: []string{".."}},
	{op: "read", args: []string{"abs"}},
	{op: "read", args: []string{"rel"}},
	{op: "read", args: []string{"chain1"}},
	{op: "read", args: []string{"sub/chain"}},
	{op: "read", args: []string{"absdir/secret.txt"}},
	{op: "read", args: []string{"reldir/outside/secret.txt"}},
	{op: "read", args: []string{"sub/up/secret.txt"}},
	{op: "read", args: []string{"root/etc/passwd"}},
	{op: "read", args: []string{"procroot/etc/passwd"}},
	{op: "read", args: []string{"proccwd/fs_test.go"}},
	{op: "read", args: []string{"sub/abs2/file.txt"}},
	{op: "read", args: []string{"HOST/outside/secret.txt"}},
	{op: "read", args: []string{"/etc/passwd"}},
	{op: "read", args: []string{"/proc/self/root/etc/passwd"}},
	{op: "read", args: []string{"/proc/self/cwd/fs_test.go"}},
	{op: "stat", args: []string{"absdir/secret.txt"}},
	{op: "ls", args: []string{"absdir"}, only: []string{"fsops.wasm", "fsops_c.wasm"}},
	{op: "ls", args: []string{"procroot"}, only: []string{"fsops.wasm", "fsops_c.wasm"}},
	{op: "ls", args: []string{".."}, only: []string{"fsops.wasm", "fsops_c.wasm"}},
	{op: "openat", args: []string{"sub", "=../../outside/secret.txt"}, only: []string{"fsops_c.wasm"}},
	{op: "openat", args: []string{"sub", "=up/secret.txt"}, only: []string{"fsops_c.wasm"}},

	// Every mutating operation through a read-only grant.
	{op: "write", args: []string{"file.txt"}},
	{op: "write", args: []string{"new.txt"}},
	{op: "create", args: []string{"new.txt"}},
	{op: "append", args: []string{"file.txt"}},
	{op: "truncate", args: []string{"file.txt"}},
	{op: "otrunc", args: []string{"file.txt"}, only: []string{"fsops_wat.wasm"}},
	{op: "rename", args: []string{"file.txt", "moved.txt"}},
	{op: "unlink", args: []string{"file.txt"}},
	{op: "unlink", args: []string{"abs"}},
	{op: "rmdir", args: []string{"empty"}},
	{op: "mkdir", args: []string{"newdir"}},
	// No chmod: WASI preview 1 has none (Go's os.Chmod only stats the
	// file); FS.Chmod's refusal is TestReadOnly's.
	{op: "utimes", args: []string{"file.txt"}},
	{op: "symlink", args: []string{"=file.txt", "newlink"}},
	{op: "link", args: []string{"file.txt", "hard.txt"}},

	// Through a read-write grant: out by links, "..", absolute paths, and
	// links or hard links the program makes.
	{op: "write", args: []string{"abs"}, write: true},
	{op: "write", args: []string{"rel"}, write: true},
	{op: "write", args: []string{"chain1"}, write: true},
	{op: "write", args: []string{"sub/up/new.txt"}, write: true},
	{op: "write", args: []string{"absdir/new.txt"}, write: true},
	{op: "write", args: []string{"procroot/tmp/new.txt"}, write: true},
	{op: "write", args: []string{"../outside/new.txt"}, write: true},
	{op: "write", args: []string{"HOST/outside/new.txt"}, write: true},
	{op: "create", args: []string{"reldir/outside/new.txt"}, write: true},
	{op: "append", args: []string{"chain1"}, write: true},
	{op: "truncate", args: []string{"abs"}, write: true},
	{op: "mkdir", args: []string{"sub/up/newdir"}, write: true},
	{op: "mkdir", args: []string{"../outside/newdir"}, write: true},
	{op: "rename", args: []string{"file.txt", "absdir/moved.txt"}, write: true},
	{op: "rename", args: []string{"file.txt", "../outside/moved.txt"}, write: true},
	{op: "rename", args: []string{"sub/up/secret.txt", "stolen.txt"}, write: true},
	{op: "unlink", args: []string{"sub/up/secret.txt"}, write: true},
	{op: "unlink", args: []string{"../outside/secret.txt"}, write: true},
	{op: "rmdir", args: []string{"absdir/"}, write: true},
	{op: "utimes", args: []string{"abs"}, write: true},
	{op: "symlink", args: []string{"HOST/outside/secret.txt", "mine"}, write: true},
	{op: "symlink", args: []string{"=/etc/passwd", "mine"}, write: true},
	{op: "symlink", args: []string{"=../outside/secret.txt", "mine"}, write: true},
	{op: "symlink", args: []string{"=../../outside", "sub/mine"}, write: true},
	{op: "symlink", args: []string{"=/proc/self/root", "mine"}, write: true},
	{op: "link", args: []string{"../outside/secret.txt", "hard.txt"}, write: true},
	{op: "link", args: []string{"HOST/outside/secret.txt", "hard.txt"}, write: true},
	{op: "link", args: []string{"sub/up/secret.txt", "hard.txt"}, write: true},
	{op: "link", args: []string{"absdir/secret.txt", "hard.txt"}, write: true},
}

// guestArg turns a case's argument into the program's.
func guestArg(p program, tmp, guest, a string) string {
	switch {
	case strings.HasPrefix(a, "="):
		return a[1:]
	case strings.HasPrefix(a, "HOST/"):
		return filepath.Join(tmp, a[len("HOST/"):])
	case strings.HasPrefix(a, "/") || p.rel:
		return a
	case guest == "/":
		return "/" + a
	}
	return guest + "/" + a
}

// leaks reports whether a program's output shows anything of outside the
// grant: the secret, the names beside the grant, a host file.
func leaks(stdout string) bool {
	for _, s := range []string{secret, "secret.txt", "outside", "root:x:0", "package sandbox"} {
		if strings.Contains(stdout, s) {
			return true
		}
	}
	return false
}

// wasmLayout is layout with an empty directory to remove.
func wasmLayout(t *testing.T) (grant, outside string) {
	grant, outside = layout(t)
	must(t, os.Mkdir(filepath.Join(grant, "empty"), 0o755))
	return grant, outside
}

// TestWasmEscapes tries every escape with each program, its grant at / and
// at /data, and checks each was refused: a failing exit, no secret on
// stdout, nothing outside changed and, when read-only, nothing inside.
func TestWasmEscapes(t *testing.T) {
	for _, p := range programs {
		t.Run(p.file, func(t *testing.T) {
			t.Parallel()
			c := env().compile(t, p.file)
			for _, e := range wasmEscapes {
				if e.only != nil && !slices.Contains(e.only, p.file) {
					continue
				}
				op := e.op
				if p.ops != nil {
					if op = p.ops[e.op]; op == "" {
						continue
					}
				}
				for _, guest := range []string{"/", "/data"} {
					grant, outside := wasmLayout(t)
					tmp := filepath.Dir(grant)
					f := mount(t, grant, e.write)
					insideBefore, outsideBefore := snapshot(t, grant), snapshot(t, outside)
					args := []string{op}
					for _, a := range e.args {
						args = append(args, guestArg(p, tmp, guest, a))
					}
					r := runProgram(t, c, []mountPoint{{f, guest}}, args)
					what := strings.Join(append([]string{e.op}, e.args...), " ")
					if e.write {
						what += " (read-write)"
					}
					t.Logf("%s at %s: exit %d", what, guest, r.exit)
					// Go cleans "/.." to "/", which at / is the grant
					// itself: listing it is no escape, showing outside is.
					if r.exit == 0 && e.op != "ls" || leaks(r.stdout) {
						t.Errorf("%s at %s: exit %d, stdout %q: not refused", what, guest, r.exit, r.stdout)
					}
					if strings.Contains(r.stderr, grant) {
						t.Errorf("%s at %s: the host path shows in %q", what, guest, r.stderr)
					}
					if after := snapshot(t, outside); !slices.Equal(after, outsideBefore) {
						t.Errorf("%s at %s: outside the grant changed:\n%s", what, guest, strings.Join(after, "\n"))
					}
					if after := snapshot(t, grant); !e.write && !slices.Equal(after, insideBefore) {
						t.Errorf("%s at %s: the read-only grant changed:\n%s", what, guest, strings.Join(after, "\n"))
					}
				}
			}
		})
	}
}

// TestWasmWithin shows the programs work where they may, so that the
// refusals above are the sandbox's: reading, links within, writing a
// read-write grant, and a link made within and moved to point out.
func TestWasmWithin(t *testing.T) {
	for _, p := range programs {
		t.Run(p.file, func(t *testing.T) {
			t.Parallel()
			c := env().compile(t, p.file)
			grant, outside := wasmLayout(t)
			tmp := filepath.Dir(grant)
			ro, rw := mount(t, grant, false), mount(t, grant, true)
			run := func(f *FS, args ...string) result {
				t.Helper()
				if p.ops != nil {
					args[0] = p.ops[args[0]]
				}
				for i := 1; i < len(args); i++ {
					args[i] = guestArg(p, tmp, "/data", args[i])
				}
				return runProgram(t, c, []mountPoint{{f, "/data"}}, args)
			}
			for _, name := range []string{"file.txt", "inlink", "sub/inup", "sub/../file.txt"} {
				if r := run(ro, "read", name); r.exit != 0 || r.stdout != "hello" {
					t.Errorf("read %s: %+v", name, r)
				}
			}
			if r := run(ro, "readlink", "abs"); r.exit != 0 || r.stdout != filepath.Join(outside, "secret.txt") {
				t.Errorf("readlink abs: %+v", r)
			}
			if r := run(ro, "stat", "file.txt"); r.exit != 0 {
				t.Errorf("stat file.txt: %+v", r)
			}
			if r := run(rw, "write", "new.txt"); r.exit != 0 {
				t.Errorf("write new.txt: %+v", r)
			}
			if got, _ := os.ReadFile(filepath.Join(grant, "new.txt")); string(got) != "written by fsops" {
				t.Errorf("new.txt = %q", got)
			}
			for _, args := range [][]string{
				{"mkdir", "made"}, {"rename", "new.txt", "made/new.txt"}, {"link", "made/new.txt", "made/hard.txt"},
				{"unlink", "made/new.txt"}, {"utimes", "made/hard.txt"}, {"symlink", "=x.txt", "sub/ok"},
				{"rename", "sub/ok", "moved"},
			} {
				if r := run(rw, args...); r.exit != 0 {
					t.Errorf("%v: %+v", args, r)
				}
			}
			// A link that climbs, even one that stays within, is refused: a
			// rename could make it point out (sub/ok -> ../x.txt moved up).
			if r := run(rw, "symlink", "=../x.txt", "sub/up"); r.exit == 0 {
				t.Errorf("a link with .. was made: %+v", r)
			}
		})
	}
}

// TestWasmSwapped: a grant swapped for a link to elsewhere while mounted
// keeps showing the directory it was; mounted after, it is refused.
func TestWasmSwapped(t *testing.T) {
	for _, p := range programs {
		t.Run(p.file, func(t *testing.T) {
			t.Parallel()
			c := env().compile(t, p.file)
			grant, outside := wasmLayout(t)
			f := mount(t, grant, true)
			must(t, os.Rename(grant, grant+".old"))
			must(t, os.Symlink(outside, grant))
			arg := func(a string) string { return guestArg(p, "", "/data", a) }
			read := p.ops["read"]
			if read == "" {
				read = "read"
			}
			if r := runProgram(t, c, []mountPoint{{f, "/data"}}, []string{read, arg("file.txt")}); r.exit != 0 || r.stdout != "hello" {
				t.Errorf("read file.txt after the swap: %+v", r)
			}
			if r := runProgram(t, c, []mountPoint{{f, "/data"}}, []string{read, arg("secret.txt")}); r.exit == 0 {
				t.Errorf("read secret.txt after the swap: %+v", r)
			}
			if _, err := Mount(Dir{Host: grant, Guest: "/data"}); !errors.Is(err, ErrGrant) {
				t.Errorf("Mount after the swap: %v, want ErrGrant", err)
			}
		})
	}
}
