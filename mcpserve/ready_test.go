package mcpserve_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
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

// /healthz is readiness: 503 with Ready's reason while it fails, 200 once it
// passes. /livez is liveness: 200 throughout. Neither needs the token.
func TestHealthzReady(t *testing.T) {
	h := newHarness(t, runtime.Limits{}, &mcpserve.Options{Ready: func(context.Context) error {
		return errors.New("database unreachable")
	}})
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{Token: "secret"})
	if code, status, reason := get(t, ts.URL+"/healthz"); code != http.StatusServiceUnavailable || status != "not ready" || reason != "database unreachable" {
		t.Fatalf("healthz, not ready = %d %q %q; want 503 not ready, database unreachable", code, status, reason)
	}
	if code, status, _ := get(t, ts.URL+"/livez"); code != http.StatusOK || status != "live" {
		t.Fatalf("livez, not ready = %d %q; want 200 live", code, status)
	}
	if code, _, _ := get(t, ts.URL+"/v1/programs"); code != http.StatusUnauthorized {
		t.Fatalf("/v1/programs without the token = %d, want 401: only the probes are open", code)
	}
	// An answer stands for a second (ready_internal_test.go); a new server
	// asks anew.
	h.build(&mcpserve.Options{Ready: func(context.Context) error { return nil }})
	ts = h.serveHTTP(t, mcpserve.HTTPConfig{Token: "secret"})
	if code, status, _ := get(t, ts.URL+"/healthz"); code != http.StatusOK || status != "ok" {
		t.Fatalf("healthz, ready = %d %q; want 200 ok", code, status)
	}
}

// Draining wins over readiness, as before there was any.
func TestHealthzDrainingWhileNotReady(t *testing.T) {
	h := newHarness(t, runtime.Limits{}, &mcpserve.Options{Ready: func(context.Context) error { return errors.New("database unreachable") }})
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{})
	if err := h.srv.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, status, _ := get(t, ts.URL+"/healthz"); code != http.StatusServiceUnavailable || status != "draining" {
		t.Fatalf("healthz = %d %q, want 503 draining", code, status)
	}
}

// Hold answers on the address before the server exists (livez 200, healthz
// 503 with the reason, anything else 503), then hands the very listener to
// RunHTTP, which serves it until its context ends and closes it.
func TestHoldThenServe(t *testing.T) {
	cfg := mcpserve.HTTPConfig{Addr: "127.0.0.1:0"}
	hold, err := mcpserve.Hold(cfg, "database unreachable", nil)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + hold.Addr().String()
	if code, status, reason := get(t, base+"/healthz"); code != http.StatusServiceUnavailable || status != "not ready" || reason != "database unreachable" {
		t.Fatalf("healthz, held = %d %q %q; want 503 not ready, database unreachable", code, status, reason)
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
	_, err := mcpserve.Hold(mcpserve.HTTPConfig{Addr: "0.0.0.0:0"}, "x", nil)
	if !errors.Is(err, mcpserve.ErrNeedsToken) {
		t.Fatalf("Hold on 0.0.0.0 without a token: %v, want ErrNeedsToken", err)
	}
}
