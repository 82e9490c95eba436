package runtime_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/host"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// The tests here run testdata/wasienv.wat, a WASI program that returns its
// arguments and environment as WASI gives them and writes to stdout and
// stderr, under the binary's WASI table: a grant reaches the program as
// the deployment says, and nothing else does.

// logged collects the lines of Config.Log.
type logged struct {
	mu    sync.Mutex
	lines []string
}

func (l *logged) log(_ context.Context, program, tool string, line []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, program+"."+tool+": "+string(line))
}

func (l *logged) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.lines
	l.lines = nil
	return out
}

// wasiRuntime is a runtime with the binary's WASI table, logging to l.
func wasiRuntime(t *testing.T, limits runtime.Limits, l *logged) *runtime.Runtime {
	t.Helper()
	opts := &runtime.Config{Limits: limits, Imports: []runtime.HostModule{host.WASI()}, ModuleConfig: host.ModuleConfig()}
	if l != nil {
		opts.Log = l.log
	}
	return newRuntime(t, opts)
}

func deployWASIEnv(t *testing.T, rt *runtime.Runtime, name string, g *sandbox.Grants) {
	t.Helper()
	image, err := os.ReadFile(filepath.Join("testdata", "wasienv.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Deploy(context.Background(), name, image, g); err != nil {
		t.Fatal(err)
	}
}

// callText calls a tool of wasienv and returns its result.
func callText(t *testing.T, rt *runtime.Runtime, program, tool string) string {
	t.Helper()
	out, err := rt.Call(context.Background(), program, tool, []byte(`{}`))
	if err != nil || out.Failed {
		t.Fatalf("%s.%s: %v, failure %q", program, tool, err, out.Failure)
	}
	return string(out.Result)
}

// nul joins strings as WASI gives them: each ended by a NUL byte.
func nul(s ...string) string {
	var b strings.Builder
	for _, x := range s {
		b.WriteString(x + "\x00")
	}
	return b.String()
}

func TestGrantsArgs(t *testing.T) {
	rt := wasiRuntime(t, runtime.Limits{}, nil)
	deployWASIEnv(t, rt, "plain", nil)
	deployWASIEnv(t, rt, "given", &sandbox.Grants{Args: []string{"-v", "two words", ""}})
	for _, tc := range []struct {
		program, want string
	}{
		// The program's name first, as a shell would give it, then the
		// granted arguments: nothing of berm's own command line.
		{"plain", nul("plain")},
		{"given", nul("given", "-v", "two words", "")},
	} {
		if got := callText(t, rt, tc.program, "args"); got != tc.want {
			t.Errorf("%s: args %q, want %q", tc.program, got, tc.want)
		}
	}
}

func TestGrantsEnviron(t *testing.T) {
	t.Setenv("BERM_TEST_FROM_HOST", "at deploy")
	t.Setenv("BERM_TEST_NOT_GRANTED", "secret")
	t.Setenv("BERM_TEST_GIVEN", "the host's, not the grant's")
	os.Unsetenv("BERM_TEST_UNSET")
	fast := "fast"
	given := "the grant's"
	rt := wasiRuntime(t, runtime.Limits{}, nil)
	deployWASIEnv(t, rt, "plain", nil)
	deployWASIEnv(t, rt, "env", &sandbox.Grants{
		Env: []sandbox.Env{{Name: "MODE", Value: &fast}, {Name: "BERM_TEST_FROM_HOST"}, {Name: "BERM_TEST_UNSET"}, {Name: "BERM_TEST_GIVEN", Value: &given}},
		Cwd: "/data",
	})
	// Given a value, a variable has the grant's; without one, the host's
	// at the call, and none when the host has none. PWD is the working
	// directory. Nothing else of the host's environment is there.
	if got, want := callText(t, rt, "env", "environ"), nul("MODE=fast", "BERM_TEST_FROM_HOST=at deploy", "BERM_TEST_GIVEN=the grant's", "PWD=/data"); got != want {
		t.Errorf("environ %q, want %q", got, want)
	}
	t.Setenv("BERM_TEST_FROM_HOST", "at the call")
	t.Setenv("BERM_TEST_UNSET", "set since")
	if got, want := callText(t, rt, "env", "environ"), nul("MODE=fast", "BERM_TEST_FROM_HOST=at the call", "BERM_TEST_UNSET=set since", "BERM_TEST_GIVEN=the grant's", "PWD=/data"); got != want {
		t.Errorf("environ after the host's changed: %q, want %q", got, want)
	}
	os.Unsetenv("BERM_TEST_FROM_HOST")
	if got, want := callText(t, rt, "env", "environ"), nul("MODE=fast", "BERM_TEST_UNSET=set since", "BERM_TEST_GIVEN=the grant's", "PWD=/data"); got != want {
		t.Errorf("environ after the host's was unset: %q, want %q", got, want)
	}
	// Nothing granted: an empty environment, no PWD, whatever the host has.
	if got := callText(t, rt, "plain", "environ"); got != "" {
		t.Errorf("environ of a program granted nothing: %q", got)
	}
}

// TestGrantsEnvironConcurrent: calls in flight at once each read the host's
// environment when they start, and see only their own program's grants.
func TestGrantsEnvironConcurrent(t *testing.T) {
	t.Setenv("BERM_TEST_FROM_HOST", "host")
	a, b := "a", "b"
	rt := wasiRuntime(t, runtime.Limits{}, nil)
	deployWASIEnv(t, rt, "a", &sandbox.Grants{Env: []sandbox.Env{{Name: "WHO", Value: &a}, {Name: "BERM_TEST_FROM_HOST"}}})
	deployWASIEnv(t, rt, "b", &sandbox.Grants{Env: []sandbox.Env{{Name: "WHO", Value: &b}}, Cwd: "/b"})
	want := map[string]string{"a": nul("WHO=a", "BERM_TEST_FROM_HOST=host"), "b": nul("WHO=b", "PWD=/b")}
	var wg sync.WaitGroup
	errs := make(chan string, 40)
	for i := range 40 {
		program := []string{"a", "b"}[i%2]
		wg.Go(func() {
			out, err := rt.Call(context.Background(), program, "environ", []byte(`{}`))
			if err != nil || string(out.Result) != want[program] {
				errs <- fmt.Sprintf("%s: %q (%v), want %q", program, out.Result, err, want[program])
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestWASIOutputLogged: what a WASI program writes to stdout and stderr
// reaches Config.Log line by line (a last line without its newline when
// the call ends), under the same bound as berm.log.
func TestWASIOutputLogged(t *testing.T) {
	var l logged
	rt := wasiRuntime(t, runtime.Limits{MaxLogLines: 10}, &l)
	deployWASIEnv(t, rt, "wasienv", nil)
	if got := callText(t, rt, "wasienv", "print"); got != "done" {
		t.Fatalf("print = %q", got)
	}
	want := []string{"wasienv.print: out one", "wasienv.print: out two", "wasienv.print: err one", "wasienv.print: err without end"}
	if got := l.take(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("logged %q, want %q", got, want)
	}

	if got := callText(t, rt, "wasienv", "flood"); got != "done" {
		t.Fatalf("flood = %q", got)
	}
	got := l.take()
	if len(got) != 11 || got[0] != "wasienv.flood: x" || got[9] != "wasienv.flood: x" ||
		got[10] != "wasienv.flood: berm: 4990 log lines dropped (limit 10 lines, 1048576 bytes per call)" {
		t.Errorf("flood logged %d lines, the last %q; want 10 lines of x and the count of those dropped", len(got), got[len(got)-1])
	}
	// The bound is per call: the next call logs again.
	callText(t, rt, "wasienv", "print")
	if got := l.take(); len(got) != 4 {
		t.Errorf("the call after a flood logged %q", got)
	}
}

// TestWASIOutputWithoutLog: with no Config.Log, output goes nowhere and
// the call is as it was.
func TestWASIOutputWithoutLog(t *testing.T) {
	rt := wasiRuntime(t, runtime.Limits{}, nil)
	deployWASIEnv(t, rt, "wasienv", nil)
	if got := callText(t, rt, "wasienv", "flood"); got != "done" {
		t.Fatalf("flood = %q", got)
	}
}
