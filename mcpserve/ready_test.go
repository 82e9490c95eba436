package mcpserve_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
)

// get returns a route's status code and its JSON body's status and reason.
func get(t *testing.T, url string) (code int, status, reason string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Status, Reason string }
	json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Status, body.Reason
}

// The probes: /livez 200 throughout; /readyz 503 "loading" until the
// programs found at start are loaded, then 200 whatever the state's health;
// /healthz as /readyz and also 503 with CheckState's reason while it fails.
// None needs the token.
func TestProbes(t *testing.T) {
	t.Parallel()
	unreachable := func(context.Context) error { return errors.New("database unreachable") }
	h := newHarness(t, runtime.Limits{}, &mcpserve.Options{CheckState: unreachable})
	h.deploy(t, "echo", "echo.wasm")
	cfg := mcpserve.HTTPConfig{Token: "secret"}
	// Not started: nothing loaded yet.
	early := httptest.NewServer(h.srv.Handler(cfg))
	t.Cleanup(early.Close)
	unstarted := h.srv
	t.Cleanup(func() { unstarted.Close(context.Background()) })
	for _, path := range []string{"/readyz", "/healthz"} {
		if code, status, reason := get(t, early.URL+path); code != http.StatusServiceUnavailable || status != "not ready" || reason != "loading" {
			t.Fatalf("%s before the programs loaded = %d %q %q; want 503 not ready, loading", path, code, status, reason)
		}
	}
	if code, status, _ := get(t, early.URL+"/livez"); code != http.StatusOK || status != "live" {
		t.Fatalf("livez before the programs loaded = %d %q; want 200 live", code, status)
	}

	h.build(&mcpserve.Options{CheckState: unreachable})
	ts := h.serveHTTP(t, cfg)
	if code, status, _ := get(t, ts.URL+"/readyz"); code != http.StatusOK || status != "ok" {
		t.Fatalf("readyz, loaded, state unreachable = %d %q; want 200 ok: calls that touch no data still work", code, status)
	}
	if code, status, reason := get(t, ts.URL+"/healthz"); code != http.StatusServiceUnavailable || status != "not ready" || reason != "database unreachable" {
		t.Fatalf("healthz, state unreachable = %d %q %q; want 503 not ready, database unreachable", code, status, reason)
	}
	if code, status, _ := get(t, ts.URL+"/livez"); code != http.StatusOK || status != "live" {
		t.Fatalf("livez, state unreachable = %d %q; want 200 live", code, status)
	}
	if code, _, _ := get(t, ts.URL+"/v1/programs"); code != http.StatusUnauthorized {
		t.Fatalf("/v1/programs without the token = %d, want 401: only the probes are open", code)
	}
	// An answer stands for a second (ready_internal_test.go); a new server
	// asks anew.
	h.build(&mcpserve.Options{CheckState: func(context.Context) error { return nil }})
	ts = h.serveHTTP(t, cfg)
	for _, path := range []string{"/readyz", "/healthz"} {
		if code, status, _ := get(t, ts.URL+path); code != http.StatusOK || status != "ok" {
			t.Fatalf("%s, healthy = %d %q; want 200 ok", path, code, status)
		}
	}
}

// Draining wins over the state's health, on both probes.
func TestProbesDraining(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, &mcpserve.Options{CheckState: func(context.Context) error { return errors.New("database unreachable") }})
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{})
	if err := h.srv.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/readyz", "/healthz"} {
		if code, status, _ := get(t, ts.URL+path); code != http.StatusServiceUnavailable || status != "draining" {
			t.Fatalf("%s = %d %q, want 503 draining", path, code, status)
		}
	}
}

// Hold answers on the address before the server exists (livez 200, readyz
// and healthz 503 with the reason, anything else 503), then hands the very listener to
// RunHTTP, which serves it until its context ends and closes it.
func TestHoldThenServe(t *testing.T) {
	t.Parallel()
	cfg := mcpserve.HTTPConfig{Addr: "127.0.0.1:0"}
	hold, err := mcpserve.Hold(cfg, "database unreachable", nil)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + hold.Addr().String()
	for _, path := range []string{"/readyz", "/healthz"} {
		if code, status, reason := get(t, base+path); code != http.StatusServiceUnavailable || status != "not ready" || reason != "database unreachable" {
			t.Fatalf("%s, held = %d %q %q; want 503 not ready, database unreachable", path, code, status, reason)
		}
	}
	hold.SetReason("loading")
	if code, _, reason := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || reason != "loading" {
		t.Fatalf("readyz after SetReason = %d %q; want 503 loading", code, reason)
	}
	if code, status, _ := get(t, base+"/livez"); code != http.StatusOK || status != "live" {
		t.Fatalf("livez, held = %d %q; want 200 live", code, status)
	}
	if code, _, _ := get(t, base+"/v1/programs"); code != http.StatusServiceUnavailable {
		t.Fatalf("/v1/programs, held = %d, want 503", code)
	}

	ln, err := hold.Listener(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, runtime.Limits{}, nil)
	h.start(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	cfg.Addr, cfg.Listener = hold.Addr().String(), ln
	go func() { done <- h.srv.RunHTTP(ctx, cfg, 0) }()
	<-h.srv.Loaded()
	if code, status, _ := get(t, base+"/healthz"); code != http.StatusOK || status != "ok" {
		t.Fatalf("healthz, served = %d %q; want 200 ok", code, status)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunHTTP: %v", err)
	}
	if c, err := net.Dial("tcp", hold.Addr().String()); err == nil {
		c.Close()
		t.Fatal("the address still takes connections after RunHTTP returned")
	}
}

// Closing a Hold gives the address up.
func TestHoldClose(t *testing.T) {
	t.Parallel()
	hold, err := mcpserve.Hold(mcpserve.HTTPConfig{Addr: "127.0.0.1:0"}, "database unreachable", nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := hold.Addr().String()
	hold.Close()
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("the address still takes connections after Close")
	}
}

// Hold refuses what RunHTTP refuses: beyond loopback without a token.
func TestHoldNeedsTokenBeyondLoopback(t *testing.T) {
	t.Parallel()
	_, err := mcpserve.Hold(mcpserve.HTTPConfig{Addr: "0.0.0.0:0"}, "x", nil)
	if !errors.Is(err, mcpserve.ErrNeedsToken) {
		t.Fatalf("Hold on 0.0.0.0 without a token: %v, want ErrNeedsToken", err)
	}
}
