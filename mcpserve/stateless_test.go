package mcpserve_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
)

// roundRobin is a balancer without sticky sessions: each request goes to the
// next backend in turn. It counts the requests each backend got.
func roundRobin(t *testing.T, backends ...*httptest.Server) (*httptest.Server, []*atomic.Int64) {
	t.Helper()
	var next atomic.Uint64
	counts := make([]*atomic.Int64, len(backends))
	targets := make([]*url.URL, len(backends))
	for i, b := range backends {
		counts[i] = new(atomic.Int64)
		u, err := url.Parse(b.URL)
		if err != nil {
			t.Fatal(err)
		}
		targets[i] = u
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			i := int(next.Add(1)-1) % len(targets)
			counts[i].Add(1)
			r.SetURL(targets[i])
		},
		FlushInterval: -1, // a call's events as they come
	}
	ts := httptest.NewServer(proxy)
	t.Cleanup(ts.Close)
	return ts, counts
}

// twoReplicas serves echo from two servers, each with its own store (what a
// replica shares with the other is not the point here: its sessions are),
// behind a round-robin balancer.
func twoReplicas(t *testing.T, cfg mcpserve.HTTPConfig) (*httptest.Server, []*atomic.Int64) {
	t.Helper()
	var backends []*httptest.Server
	for range 2 {
		h := newHarness(t, runtime.Limits{}, nil)
		h.deploy(t, "echo", "echo.wasm")
		backends = append(backends, h.serveHTTP(t, cfg))
	}
	return roundRobin(t, backends...)
}

// With Stateless, a real client behind a balancer that alternates between two
// replicas initializes on one, lists and calls on both, and reads a
// resource: no request needs the replica that saw the one before.
func TestStatelessAcrossReplicas(t *testing.T) {
	t.Parallel()
	lb, counts := twoReplicas(t, mcpserve.HTTPConfig{Stateless: true})
	cs, err := connectHTTP(t, lb.URL+"/mcp", nil)
	if err != nil {
		t.Fatalf("connect through the balancer: %v", err)
	}
	// No notification can reach a client without a session: initialize
	// promises none, so that a client lists again rather than waits.
	caps := cs.InitializeResult().Capabilities
	if caps.Tools == nil || caps.Tools.ListChanged || caps.Resources == nil || caps.Resources.ListChanged {
		t.Errorf("stateless initialize promises list_changed: tools %+v, resources %+v", caps.Tools, caps.Resources)
	}
	for i := range 4 {
		tools, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatalf("tools/list %d: %v", i, err)
		}
		if len(tools.Tools) != 1 || tools.Tools[0].Name != "echo_echo" {
			t.Fatalf("tools/list %d: %+v, want echo_echo", i, tools.Tools)
		}
		res, err := call(t, cs, "echo_echo", map[string]any{"message": "round robin"})
		if err != nil || text(t, res) != `{"message":"round robin"}` {
			t.Fatalf("tools/call %d: %+v, %v", i, res, err)
		}
	}
	if _, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "berm://echo/usage"}); err != nil {
		t.Fatalf("resources/read: %v", err)
	}
	for i, c := range counts {
		if c.Load() < 4 {
			t.Errorf("replica %d answered %d requests, want both to answer several", i, c.Load())
		}
	}
}

// Without Stateless, the same balancer breaks the client: the session the
// first replica opened is unknown to the second, which answers 404 "session
// not found". (The SDK's client does not report the initialized
// notification's 404, so connecting appears to work; calls do not.) Of two
// calls in a row, one at least meets the replica without the session.
func TestStatefulNeedsStickySessions(t *testing.T) {
	t.Parallel()
	lb, _ := twoReplicas(t, mcpserve.HTTPConfig{})
	cs, err := connectHTTP(t, lb.URL+"/mcp", nil)
	if err != nil {
		t.Logf("connect failed already: %v", err)
		return
	}
	var failed error
	for range 2 {
		if _, err := call(t, cs, "echo_echo", map[string]any{"message": "x"}); err != nil {
			failed = err
		}
	}
	if failed == nil {
		t.Fatal("a stateful server behind a round-robin balancer served two calls in a row; want a failure (the session is the other replica's)")
	}
	t.Logf("as expected: %v", failed)
}

// Stateless refuses the GET stream, which carries what a server sends unasked
// (list_changed): 405, as the SDK documents.
func TestStatelessRefusesGETStream(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{Stateless: true})
	req, err := http.NewRequest(http.MethodGet, ts.URL+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /mcp = %d, want 405", resp.StatusCode)
	}
}
