package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/berm-dev/berm/runtime"
)

// A WASI program that says it panicked (Go's "panic: " or "fatal error: ",
// on stderr or stdout) and then traps has the first such line of the call
// in its trap's message: "wasm error: unreachable" alone tells the model and
// the user nothing of a nil map. The line is still logged as it was.
func TestTrapQuotesPanic(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var logged []string
	opts := runtime.Config{
		Limits: runtime.Limits{Memory: 32 << 20},
		Log: func(_ context.Context, _, _ string, line []byte) {
			mu.Lock()
			defer mu.Unlock()
			logged = append(logged, string(line))
		},
	}
	rt := poolRuntime(t, opts)
	deployPoolFile(t, rt, "trap", "trap_panic.wasm", nil)
	// The same program under a budget of two lines, spent before its panic.
	opts.Limits.MaxLogLines = 2
	small := poolRuntime(t, opts)
	deployPoolFile(t, small, "trap", "trap_panic.wasm", nil)

	long := "panic: " + strings.Repeat("x", 192) // 199 bytes: an é more would pass 200
	for _, tc := range []struct {
		tool string
		rt   *runtime.Runtime
		want string // the whole error, or the result when it starts with "="
		oom  bool
	}{
		{"panic", rt, "trap.panic: program trapped: panic: assignment to entry in nil map", false},
		{"stdout", rt, "trap.stdout: program trapped: panic: on stdout", false},
		{"oom", rt, "trap.oom: program trapped: fatal error: out of memory (the instance's memory limit is 32 MiB)", true},
		{"fatal", rt, "trap.fatal: program trapped: fatal error: all goroutines are asleep - deadlock!", false},
		{"twice", rt, "trap.twice: program trapped: panic: first [recovered]", false},
		{"exit", rt, "trap.exit: program trapped: panic: exit (it exited with code 2)", false},
		{"long", rt, "trap.long: program trapped: " + long + "…", false},
		{"flood", small, "trap.flood: program trapped: panic: past the budget", false},
		{"quiet", rt, "trap.quiet: program trapped: wasm error: unreachable", false},
		{"notstart", rt, "trap.notstart: program trapped: wasm error: unreachable", false},
		{"survives", rt, "=ok", false},
		// The caller is another program: it is not shown what its callee
		// wrote.
		{"nested", rt, "=berm.call trap.panic: program trapped: wasm error: unreachable", false},
		{"nested_trap", rt, "trap.nested_trap: program trapped: wasm error: unreachable", false},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			out, err := tc.rt.Call(context.Background(), "trap", tc.tool, []byte(`{}`))
			if result, ok := strings.CutPrefix(tc.want, "="); ok {
				if err != nil || string(out.Result) != result {
					t.Fatalf("%s: %q, %v; want %q", tc.tool, out.Result, err, result)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("%s: %v\nwant %s", tc.tool, err, tc.want)
			}
			if !errors.Is(err, runtime.ErrTrap) {
				t.Errorf("%s: %v is not ErrTrap", tc.tool, err)
			}
			if errors.Is(err, runtime.ErrOutOfMemory) != tc.oom {
				t.Errorf("%s: errors.Is(%v, ErrOutOfMemory) = %v, want %v", tc.tool, err, !tc.oom, tc.oom)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if !contains(logged, "panic: assignment to entry in nil map") || !contains(logged, "fatal error: out of memory") {
		t.Errorf("the panic lines are not logged: %q", logged)
	}
}

func contains(lines []string, line string) bool {
	for _, l := range lines {
		if l == line {
			return true
		}
	}
	return false
}
