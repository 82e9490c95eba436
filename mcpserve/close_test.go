package mcpserve_test

import (
	"context"
	"encoding/json"
	"net/http"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
)

// Close stops every goroutine New and Start began (the call workers, the
// service's sync loop and compiles): ten servers leave none behind.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	h := newHarness(t, runtime.Limits{}, nil)
	h.deploy(t, "echo", "echo.wasm")
	before := goruntime.NumGoroutine()
	for range 10 {
		h.build(nil)
		if err := h.srv.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-h.srv.Loaded()
		if err := h.srv.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for goruntime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := goruntime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines left behind:\n%s", n-before, buf[:goruntime.Stack(buf, true)])
	}
}

// While draining, /healthz says so with 503, so that a load balancer sends
// calls elsewhere.
func TestHealthzDraining(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{})
	health := func() (int, string) {
		resp, err := http.Get(ts.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Status string }
		json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Status
	}
	if code, status := health(); code != http.StatusOK || status != "ok" {
		t.Fatalf("healthz = %d %q, want 200 ok", code, status)
	}
	if err := h.srv.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, status := health(); code != http.StatusServiceUnavailable || status != "draining" {
		t.Fatalf("healthz while draining = %d %q, want 503 draining", code, status)
	}
}
