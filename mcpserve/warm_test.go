package mcpserve_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
)

// TestGoCallsReuseInstances: over MCP, as berm serve wires the runtime (WASI,
// the program's output to the server's log), the calls of a Go-built program
// run in one pooled instance, reset between them, as they do in process. An
// instance per call costs milliseconds: a WASI call that Go's runtime makes,
// counted as a change of the instance's state, or its output captured as
// one, would make every call over MCP a cold one.
func TestGoCallsReuseInstances(t *testing.T) {
	t.Parallel()
	image, err := os.ReadFile(filepath.Join("..", "examples", "hello", "hello.wasm"))
	if err != nil {
		t.Skip(err)
	}
	m := newMetricsServer(t, true, runtime.Limits{Deadline: 10 * time.Second}, mcpserve.Options{MaxConcurrent: 1})
	if _, err := m.svc.Deploy(context.Background(), "hello", image, "hello.wasm", nil); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); m.srv.Programs()["hello"] == nil; time.Sleep(time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatal("hello not served")
		}
	}
	const calls = 20
	for range calls {
		if got := text(t, m.call(t, "hello_greet", `{"name":"Ada"}`)); got != "Hello, Ada!" {
			t.Fatalf("hello_greet = %q", got)
		}
	}
	// One instance for the snapshot of _initialize, one that every call
	// then runs in.
	fams := scrape(t, m.ts.URL, metricsToken)
	if got := value(fams, "berm_instantiate_duration_seconds", map[string]string{"program": "hello"}); got < 1 || got > 2 {
		t.Errorf("%d calls of hello_greet made %v instances, want 1 or 2", calls, got)
	}
}
