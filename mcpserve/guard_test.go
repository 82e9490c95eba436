package mcpserve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
)

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// refused checks that a response is one of berm's JSON refusals, and
// returns its error.
func refused(t *testing.T, resp *http.Response, status int, kind string) string {
	t.Helper()
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e struct{ Error, Kind string }
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/json" ||
		json.Unmarshal(data, &e) != nil || e.Error == "" || e.Kind != kind {
		t.Errorf("%s %s: %s %q %s, want %d and a JSON error of kind %q",
			resp.Request.Method, resp.Request.URL.Path, resp.Status, resp.Header.Get("Content-Type"), data, status, kind)
	}
	return e.Error
}

// deployed lists the store's deployments and the served programs.
func (h *harness) deployed(t *testing.T) (stored, served []string) {
	t.Helper()
	list, err := h.svc.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range list {
		stored = append(stored, d.Name)
	}
	for name := range h.srv.Programs() {
		served = append(served, name)
	}
	slices.Sort(served)
	return stored, served
}

// TestHTTPHostAndOrigin sends every route with the Host and Origin of DNS
// rebinding, of a page elsewhere, and of names the server answers to: the
// refusals are 403 in JSON on every route, /mcp included, and change nothing.
func TestHTTPHostAndOrigin(t *testing.T) {
	t.Parallel()
	image, err := os.ReadFile("../testdata/echo.wasm")
	if err != nil {
		t.Fatal(err)
	}
	routes := []struct {
		method, path, ctype string
		body                []byte
		ok                  int // the status of an allowed request
	}{
		{"POST", "/mcp", "application/json", []byte(initBody), http.StatusOK},
		{"GET", "/mcp", "", nil, http.StatusBadRequest}, // the SDK: a stream needs a session
		{"DELETE", "/mcp", "", nil, http.StatusBadRequest},
		{"GET", "/healthz", "", nil, http.StatusOK},
		{"GET", "/v1/programs", "", nil, http.StatusOK},
		{"GET", "/v1/programs/echo", "", nil, http.StatusOK},
		{"PUT", "/v1/programs/evil", "application/wasm", image, http.StatusOK},
		{"DELETE", "/v1/programs/echo", "", nil, http.StatusOK},
	}
	tests := []struct {
		name         string
		allowed      []string
		host, origin string // "" leaves the client's own
		ok           bool
	}{
		{name: "foreign Host", host: "evil.example:7777"},
		{name: "foreign Origin", origin: "http://evil.example:7777"},
		{name: "Origin equal to a foreign Host", host: "evil.example:7777", origin: "http://evil.example:7777"},
		{name: "opaque Origin", origin: "null"},
		{name: "Host not among the allowed", allowed: []string{"mcp.example.com"}, host: "evil.example"},
		{name: "Origin not among the allowed", allowed: []string{"mcp.example.com"}, host: "mcp.example.com", origin: "https://evil.example"},
		{name: "allowed host", allowed: []string{"mcp.example.com"}, host: "mcp.example.com", origin: "https://mcp.example.com", ok: true},
		{name: "allowed host with a port", allowed: []string{"MCP.example.com"}, host: "mcp.example.com:8443", ok: true},
		{name: "IPv6 loopback", host: "[::1]:7777", origin: "http://[::1]:7777", ok: true},
		{name: "localhost with a port", host: "localhost:7777", origin: "http://localhost:6274", ok: true},
		{name: "localhost", host: "localhost", ok: true},
		{name: "127.0.0.2", host: "127.0.0.2:7777", ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, runtime.Limits{}, nil)
			h.deploy(t, "echo", "echo.wasm")
			ts := h.serveHTTP(t, mcpserve.HTTPConfig{AllowedHosts: tt.allowed})
			for _, rt := range routes {
				req, _ := http.NewRequest(rt.method, ts.URL+rt.path, bytes.NewReader(rt.body))
				if rt.ctype != "" {
					req.Header.Set("Content-Type", rt.ctype)
				}
				req.Header.Set("Accept", "application/json, text/event-stream")
				if tt.host != "" {
					req.Host = tt.host
				}
				if tt.origin != "" {
					req.Header.Set("Origin", tt.origin)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				if !tt.ok {
					refused(t, resp, http.StatusForbidden, "forbidden")
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != rt.ok {
					t.Errorf("%s %s: %s, want %d", rt.method, rt.path, resp.Status, rt.ok)
				}
			}
			want := []string{"echo"}
			if tt.ok {
				want = []string{"evil"}
			}
			if stored, served := h.deployed(t); !slices.Equal(stored, want) || !slices.Equal(served, want) {
				t.Fatalf("deployed %v, served %v; want %v", stored, served, want)
			}
		})
	}
}

// TestHTTPHostBeyondLoopback: bound beyond loopback, the server needs a
// token, which a rebinding page cannot send, and answers to any Host unless
// allowed hosts are given; Origin is checked all the same.
func TestHTTPHostBeyondLoopback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		cfg          mcpserve.HTTPConfig
		host, origin string
		status       int
	}{
		{"any Host", mcpserve.HTTPConfig{Addr: "0.0.0.0:7777"}, "mcp.example.com", "", http.StatusOK},
		{"foreign Origin", mcpserve.HTTPConfig{Addr: "0.0.0.0:7777"}, "mcp.example.com", "https://mcp.example.com", http.StatusForbidden},
		{"loopback Origin", mcpserve.HTTPConfig{Addr: "0.0.0.0:7777"}, "mcp.example.com", "http://localhost:6274", http.StatusOK},
		{"allowed host", mcpserve.HTTPConfig{Addr: "0.0.0.0:7777", AllowedHosts: []string{"mcp.example.com"}}, "mcp.example.com", "https://mcp.example.com", http.StatusOK},
		{"another host than the allowed", mcpserve.HTTPConfig{Addr: "0.0.0.0:7777", AllowedHosts: []string{"mcp.example.com"}}, "evil.example", "", http.StatusForbidden},
		{"the listen address", mcpserve.HTTPConfig{Addr: "10.1.2.3:7777", AllowedHosts: []string{"mcp.example.com"}}, "10.1.2.3:7777", "", http.StatusOK},
		{"loopback", mcpserve.HTTPConfig{Addr: "10.1.2.3:7777", AllowedHosts: []string{"mcp.example.com"}}, "127.0.0.1:7777", "", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, runtime.Limits{}, nil)
			tt.cfg.Token = "tok"
			ts := h.serveHTTP(t, tt.cfg)
			for _, path := range []string{"/healthz", "/v1/programs"} {
				req, _ := http.NewRequest("GET", ts.URL+path, nil)
				req.Host = tt.host
				req.Header.Set("Authorization", "Bearer tok")
				if tt.origin != "" {
					req.Header.Set("Origin", tt.origin)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				if tt.status == http.StatusForbidden {
					refused(t, resp, http.StatusForbidden, "forbidden")
					continue
				}
				resp.Body.Close()
				if resp.StatusCode != tt.status {
					t.Errorf("GET %s: %s, want %d", path, resp.Status, tt.status)
				}
			}
		})
	}
}

func TestRunHTTPRefusesBadAllowedHost(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	for _, bad := range []string{"https://mcp.example.com", "mcp.example.com:443", "mcp.example.com/mcp", "", "*.example.com"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := h.srv.RunHTTP(ctx, mcpserve.HTTPConfig{Addr: "127.0.0.1:0", AllowedHosts: []string{bad}}, time.Second)
		cancel()
		if !errors.Is(err, mcpserve.ErrAllowedHost) || !strings.Contains(err.Error(), "allowed host") {
			t.Errorf("--allowed-host %q: %v, want ErrAllowedHost", bad, err)
		}
	}
}
