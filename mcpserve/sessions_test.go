package mcpserve_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
)

// from posts one message to handler as a client at the remote address
// remote, within a session if given: the clients of these tests are told
// apart by address, which loopback cannot do.
func from(t *testing.T, handler http.Handler, remote, session, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	req.RemoteAddr = remote
	req.Host = "127.0.0.1:7777"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	return rec
}

// sessionFrom opens a session as a client at remote.
func sessionFrom(t *testing.T, handler http.Handler, remote string) string {
	t.Helper()
	rec := from(t, handler, remote, "", initBody)
	id := rec.Header().Get("Mcp-Session-Id")
	if rec.Code != http.StatusOK || id == "" {
		t.Fatalf("initialize from %s: %d %s", remote, rec.Code, rec.Body)
	}
	if rec := from(t, handler, remote, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); rec.Code != http.StatusAccepted {
		t.Fatalf("initialized from %s: %d %s", remote, rec.Code, rec.Body)
	}
	return id
}

// alive reports whether a session still answers.
func alive(t *testing.T, handler http.Handler, remote, session string) bool {
	t.Helper()
	rec := from(t, handler, remote, session, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	switch rec.Code {
	case http.StatusOK:
		return true
	case http.StatusNotFound:
		return false
	}
	t.Fatalf("ping: %d %s", rec.Code, rec.Body)
	return false
}

// TestHTTPSessionsPerClient: past its bound, a client's new session ends
// its own least recently used idle session, not another client's; an IPv6
// client is its /64; loopback clients, which cannot be told apart, are not
// bound.
func TestHTTPSessionsPerClient(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	h.start(t)
	<-h.srv.Loaded()
	const grace = 100 * time.Millisecond
	handler := h.srv.Handler(mcpserve.WithSessionGrace(mcpserve.HTTPConfig{MaxSessions: 100, MaxSessionsPerClient: 2}, grace))

	other := sessionFrom(t, handler, "198.51.100.9:4000")
	x1 := sessionFrom(t, handler, "192.0.2.1:1000")
	x2 := sessionFrom(t, handler, "192.0.2.1:1001")
	alive(t, handler, "192.0.2.1:1000", x1) // x1 in use, x2 only its handshake
	alive(t, handler, "192.0.2.1:1000", x1)
	time.Sleep(grace) // x2 is abandoned, x1 established
	x3 := sessionFrom(t, handler, "192.0.2.1:1002")
	if alive(t, handler, "192.0.2.1:1001", x2) {
		t.Error("a client past its bound kept all its sessions")
	}
	for name, s := range map[string]string{"x1": x1, "x3": x3, "another client's": other} {
		if !alive(t, handler, "192.0.2.1:1000", s) {
			t.Errorf("session %s ended", name)
		}
	}

	v6 := []string{sessionFrom(t, handler, "[2001:db8:0:1::1]:1"), sessionFrom(t, handler, "[2001:db8:0:1::2]:1")}
	sessionFrom(t, handler, "[2001:db8:0:1:ffff::3]:1")
	if alive(t, handler, "[2001:db8:0:1::1]:1", v6[0]) && alive(t, handler, "[2001:db8:0:1::2]:1", v6[1]) {
		t.Error("three addresses of one /64 held three sessions")
	}

	var local []string
	for _, remote := range []string{"127.0.0.1:1", "127.0.0.2:1", "[::1]:1"} {
		local = append(local, sessionFrom(t, handler, remote))
	}
	for _, s := range local {
		if !alive(t, handler, "127.0.0.1:1", s) {
			t.Error("loopback clients were bound per client")
		}
	}
}

// TestHTTPSessionsFairShare: a full server ends an idle session of the
// client holding the most, so that a flood from one address replaces its
// own sessions rather than another client's, even an older one.
func TestHTTPSessionsFairShare(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	h.start(t)
	<-h.srv.Loaded()
	handler := h.srv.Handler(mcpserve.HTTPConfig{MaxSessions: 4})
	oldest := sessionFrom(t, handler, "198.51.100.9:4000")
	var flood []string
	for range 20 {
		flood = append(flood, sessionFrom(t, handler, "192.0.2.1:1000"))
	}
	if !alive(t, handler, "198.51.100.9:4000", oldest) {
		t.Error("a flood from one address ended another client's session")
	}
	if !alive(t, handler, "192.0.2.1:1000", flood[len(flood)-1]) || alive(t, handler, "192.0.2.1:1000", flood[0]) {
		t.Error("the flood's sessions were not replaced oldest first")
	}
}

// TestHTTPSessionsFlood: on loopback, where every client is one, a fast
// flood of sessions, however it uses them (not at all, once, twice), ends
// neither a new client's session, between its initialize and its first
// request and while in use, nor an established client's, idle: the flood's own sessions end first,
// the oldest first. (Ranked by use, a flood that used each session twice
// ended every new client's session, and a flood of bare initializes a
// session used once, as Claude Code's are.)
func TestHTTPSessionsFlood(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	h.start(t)
	<-h.srv.Loaded()
	// The flood is fast: its sessions are younger than grace, as at 100 a
	// second or more against the default bound and youngGrace.
	const grace = time.Second
	const local = "127.0.0.1:5000"
	for _, uses := range []int{0, 1, 2} {
		t.Run(fmt.Sprintf("used %d times", uses), func(t *testing.T) { // in turn: one server, one table
			handler := h.srv.Handler(mcpserve.WithSessionGrace(mcpserve.HTTPConfig{MaxSessions: 20}, grace))
			flood := func(n int) {
				for range n {
					s := sessionFrom(t, handler, local)
					for range uses {
						alive(t, handler, local, s)
					}
				}
			}
			// An established client, used once long enough ago.
			established := sessionFrom(t, handler, local)
			alive(t, handler, local, established)
			time.Sleep(grace)
			flood(30)
			// A new client between its initialize and its first request,
			// half the bound's sessions of the flood later, and after it.
			fresh := sessionFrom(t, handler, local)
			flood(10)
			if !alive(t, handler, local, fresh) {
				t.Fatal("a new client's session ended before its first request")
			}
			// In use, a request every half bound's sessions of the flood.
			for range 6 {
				flood(10)
				if !alive(t, handler, local, fresh) {
					t.Fatal("a new client's session in use ended")
				}
			}
			if !alive(t, handler, local, established) {
				t.Error("the established client's session ended")
			}
		})
	}
}

// TestHTTPSessionsRefusedDelete: a DELETE the SDK refuses (a protocol
// version it does not speak) leaves the session open and counted, so
// refused DELETEs cannot hold sessions past MaxSessions (each left one the
// SDK kept for its idle time and berm no longer counted).
func TestHTTPSessionsRefusedDelete(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	h.start(t)
	<-h.srv.Loaded()
	const remote = "127.0.0.1:1000"
	handler := h.srv.Handler(mcpserve.HTTPConfig{MaxSessions: 3})
	first := sessionFrom(t, handler, remote)
	for range 10 {
		id := sessionFrom(t, handler, remote)
		req := httptest.NewRequest(http.MethodDelete, "/mcp", nil)
		req.RemoteAddr = remote
		req.Host = "127.0.0.1:7777"
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("Mcp-Protocol-Version", "1999-01-01")
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest {
			t.Fatalf("DELETE with an unknown version: %d %s, want 400", rec.Code, rec.Body)
		}
		if !alive(t, handler, remote, id) {
			t.Fatal("a refused DELETE ended its session")
		}
	}
	n := 0
	for range h.srv.MCP().Sessions() {
		n++
	}
	if n > 3 {
		t.Errorf("the SDK holds %d sessions, past MaxSessions 3", n)
	}
	if alive(t, handler, remote, first) {
		t.Error("the first session outlived ten newer ones with MaxSessions 3")
	}
}
