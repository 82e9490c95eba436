package mcpserve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
)

// exchange posts one body to /mcp within a session (or none) and returns
// the status, the content type and the JSON-RPC messages of the answer: its
// JSON body, or the data of each event of its stream.
func exchange(t *testing.T, base, session, body string, header ...string) (int, string, []string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	ct := resp.Header.Get("Content-Type")
	var msgs []string
	if strings.HasPrefix(ct, "text/event-stream") {
		for _, line := range strings.Split(string(data), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				msgs = append(msgs, d)
			}
		}
	} else if len(bytes.TrimSpace(data)) > 0 {
		msgs = append(msgs, string(bytes.TrimSpace(data)))
	}
	return resp.StatusCode, ct, msgs
}

// rpcMsg is as much of a JSON-RPC message as the tests look at; the id is
// kept as it is on the wire.
type rpcMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeRPC(t *testing.T, msg string) rpcMsg {
	t.Helper()
	var m rpcMsg
	if err := json.Unmarshal([]byte(msg), &m); err != nil {
		t.Fatalf("not a JSON-RPC message: %q", msg)
	}
	return m
}

// TestHTTPEchoesIDs: every id comes back exactly as the client sent it, its
// JSON text, in a stream of events, in a JSON body (an error berm answers
// itself), and in a batch (protocol 2025-03-26).
func TestHTTPEchoesIDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	h.deploy(t, "echo", "echo.wasm")
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{})
	sid := openSession(t, nil, ts.URL)
	for _, id := range oddIDs {
		t.Run(id, func(t *testing.T) {
			_, ct, msgs := exchange(t, ts.URL, sid, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"echo_echo","arguments":{"id":`+id+`}}}`)
			if len(msgs) != 1 || string(decodeRPC(t, msgs[0]).ID) != id || !strings.HasPrefix(ct, "text/event-stream") {
				t.Errorf("tools/call with id %s: %s %q", id, ct, msgs)
			}
			_, ct, msgs = exchange(t, ts.URL, sid, `{"jsonrpc":"2.0","id":`+id+`,"method":"no/such"}`)
			if len(msgs) != 1 || string(decodeRPC(t, msgs[0]).ID) != id || ct != "application/json" {
				t.Errorf("an unknown method with id %s: %s %q", id, ct, msgs)
			}
		})
	}
	old := oldSession(t, ts.URL)
	var batch []string
	for _, id := range oddIDs {
		batch = append(batch, `{"jsonrpc":"2.0","id":`+id+`,"method":"ping"}`)
	}
	_, _, msgs := exchange(t, ts.URL, old, "["+strings.Join(batch, ",")+"]", "Mcp-Protocol-Version", "2025-03-26")
	got := map[string]bool{}
	for _, m := range msgs {
		got[string(decodeRPC(t, m).ID)] = true
	}
	for _, id := range oddIDs {
		if !got[id] {
			t.Errorf("a batch's ping with id %s: not answered with that id; got %q", id, msgs)
		}
	}
}

// oldSession opens a session of protocol 2025-03-26, which has batches.
func oldSession(t *testing.T, base string) string {
	t.Helper()
	resp := postMCP(t, nil, base, "", strings.Replace(initBody, "2025-11-25", "2025-03-26", 1))
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize at 2025-03-26: %s", resp.Status)
	}
	return sid
}

// TestHTTPDuplicateInFlight: a request whose id is that of a request in
// flight in the session is answered with an error (400, as the SDK's own
// check answers), the one in flight is answered as ever, and the id is free
// again once it is; the same id in another session is another request.
func TestHTTPDuplicateInFlight(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{Deadline: 2 * time.Second}, nil)
	h.deploy(t, "core", "core.wasm")
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{})
	sid, other := openSession(t, nil, ts.URL), openSession(t, nil, ts.URL)
	done := make(chan []string, 1)
	go func() { _, _, msgs := exchange(t, ts.URL, sid, loopCall(`1e308`)); done <- msgs }()
	waitInFlight(h.srv)
	for _, dup := range []string{`1e308`, `10e307`} {
		status, _, msgs := exchange(t, ts.URL, sid, `{"jsonrpc":"2.0","id":`+dup+`,"method":"ping"}`)
		if len(msgs) != 1 || status != http.StatusBadRequest {
			t.Fatalf("a second id %s in flight: %d %q", dup, status, msgs)
		}
		if m := decodeRPC(t, msgs[0]); string(m.ID) != dup || m.Error == nil || m.Error.Code != -32600 {
			t.Errorf("a second id %s in flight: %s", dup, msgs[0])
		}
	}
	if _, _, msgs := exchange(t, ts.URL, other, `{"jsonrpc":"2.0","id":1e308,"method":"ping"}`); len(msgs) != 1 || decodeRPC(t, msgs[0]).Error != nil {
		t.Errorf("the id in another session: %q", msgs)
	}
	msgs := <-done
	if len(msgs) != 1 || string(decodeRPC(t, msgs[0]).ID) != `1e308` || decodeRPC(t, msgs[0]).Error.Code != mcpserve.CodeDeadline {
		t.Fatalf("the call in flight: %q", msgs)
	}
	if _, _, msgs := exchange(t, ts.URL, sid, `{"jsonrpc":"2.0","id":1e308,"method":"ping"}`); len(msgs) != 1 || decodeRPC(t, msgs[0]).Error != nil {
		t.Errorf("the id once free: %q", msgs)
	}
}

// TestHTTPCancelled: a call the client cancels gets no response (MCP: a
// receiver should not respond), and stops.
func TestHTTPCancelled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{Deadline: time.Minute}, nil)
	h.deploy(t, "core", "core.wasm")
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{})
	sid := openSession(t, nil, ts.URL)
	done := make(chan []string, 1)
	go func() { _, _, msgs := exchange(t, ts.URL, sid, loopCall(`"c-1"`)); done <- msgs }()
	waitInFlight(h.srv)
	status, _, _ := exchange(t, ts.URL, sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c-1","reason":"no longer wanted"}}`)
	if status != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %d", status)
	}
	select {
	case msgs := <-done:
		if len(msgs) != 0 {
			t.Errorf("the cancelled call was answered: %q", msgs)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the cancelled call did not stop")
	}
	// A cancellation of what is not in flight is ignored, as MCP allows.
	if status, _, _ := exchange(t, ts.URL, sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c-1"}}`); status != http.StatusAccepted {
		t.Fatalf("a late notifications/cancelled: %d", status)
	}
}

// badRequests are requests the SDK's checkRequest refuses; each is answered
// over HTTP as over stdio, in JSON-RPC, addressed to its id.
var badRequests = []struct{ name, body string }{
	{"unknown method", `{"jsonrpc":"2.0","id":41,"method":"no/such","params":{}}`},
	{"notification with an id", `{"jsonrpc":"2.0","id":42,"method":"notifications/initialized"}`},
	{"missing params", `{"jsonrpc":"2.0","id":43,"method":"tools/call"}`},
	{"invalid level", `{"jsonrpc":"2.0","id":44,"method":"logging/setLevel","params":{"level":"loud"}}`},
}

// TestHTTPErrorsAsStdio: what the SDK refused over HTTP in plain text (an
// unknown method got 400 "JSON RPC not handled") is answered as stdio
// answers it: the same JSON-RPC error, 200, in JSON.
func TestHTTPErrorsAsStdio(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{})
	sid := openSession(t, nil, ts.URL)
	var in strings.Builder
	in.WriteString(stdioInit)
	for _, bad := range badRequests {
		in.WriteString(bad.body + "\n")
	}
	overStdio := replies(t, runStdio(t, h.srv, context.Background(), strings.NewReader(in.String()), time.Second, nil))
	for _, bad := range badRequests {
		t.Run(bad.name, func(t *testing.T) {
			status, ct, msgs := exchange(t, ts.URL, sid, bad.body)
			if status != http.StatusOK || len(msgs) != 1 {
				t.Fatalf("over HTTP: %d %s %q", status, ct, msgs)
			}
			got := decodeRPC(t, msgs[0])
			want, ok := overStdio[string(got.ID)]
			if !ok || want.Error == nil || got.Error == nil || *got.Error != *want.Error {
				t.Errorf("over HTTP %s, over stdio %+v", msgs[0], want.Error)
			}
		})
	}
}

// TestSetLevelInvalid: a level MCP does not have is refused (-32602): the
// SDK took it and then sent every level. After it, as before any level,
// nothing is logged.
func TestSetLevelInvalid(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	h.deploy(t, "core", "core.wasm")
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{})
	sid := openSession(t, nil, ts.URL)
	_, _, msgs := exchange(t, ts.URL, sid, `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"loud"}}`)
	if len(msgs) != 1 || decodeRPC(t, msgs[0]).Error == nil || decodeRPC(t, msgs[0]).Error.Code != -32602 {
		t.Fatalf("an invalid level: %q", msgs)
	}
	_, _, msgs = exchange(t, ts.URL, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"core_log","arguments":{}}}`)
	for _, m := range msgs {
		if decodeRPC(t, m).Method == "notifications/message" {
			t.Errorf("logged after an invalid level: %s", m)
		}
	}
	for _, level := range []string{"warning", "debug"} {
		if _, _, msgs := exchange(t, ts.URL, sid, `{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"`+level+`"}}`); len(msgs) != 1 || decodeRPC(t, msgs[0]).Error != nil {
			t.Fatalf("level %s: %q", level, msgs)
		}
	}
}

// TestStatelessSetLevel: a stateless server too refuses a level MCP does
// not have, and takes one it has (MCP clients, the conformance suite's too,
// expect it taken), though it applies to nothing past its request.
func TestStatelessSetLevel(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{Stateless: true})
	_, _, msgs := exchange(t, ts.URL, "", `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"loud"}}`)
	if len(msgs) != 1 || decodeRPC(t, msgs[0]).Error == nil || decodeRPC(t, msgs[0]).Error.Code != -32602 {
		t.Errorf("an invalid level on a stateless server: %q", msgs)
	}
	_, _, msgs = exchange(t, ts.URL, "", `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"error"}}`)
	if len(msgs) != 1 || decodeRPC(t, msgs[0]).Error != nil || string(decodeRPC(t, msgs[0]).Result) != "{}" {
		t.Errorf("a valid level on a stateless server: %q", msgs)
	}
}

// TestHTTPNeedsSessionID: a stateful server answers a request without
// Mcp-Session-Id, other than initialize, with 400 (MCP: servers that
// require a session id should), in JSON-RPC; it answered 200 and an error
// of its handshake.
func TestHTTPNeedsSessionID(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{})
	for body, says := range map[string]string{
		`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`:         "no Mcp-Session-Id",
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`: "no Mcp-Session-Id",
		`[{"jsonrpc":"2.0","id":5,"method":"tools/list"}]`:       "no Mcp-Session-Id",
		`[` + initBody + `]`: "initialize may not be part of a batch",
	} {
		status, _, msgs := exchange(t, ts.URL, "", body)
		if status != http.StatusBadRequest || len(msgs) != 1 || decodeRPC(t, msgs[0]).Error == nil ||
			!strings.Contains(decodeRPC(t, msgs[0]).Error.Message, says) {
			t.Errorf("%s without a session: %d %q, want %q", body, status, msgs, says)
		}
	}
	if n := h.srv.MCP(); n != nil {
		for range n.Sessions() {
			t.Error("a refused POST left a session open")
		}
	}
	if status, _, msgs := exchange(t, ts.URL, "", `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`); len(msgs) != 1 || string(decodeRPC(t, msgs[0]).ID) != "5" {
		t.Errorf("the refusal's id: %d %q", status, msgs)
	}
}

// TestHTTPLongCallSendsHeaders: a call that runs a while has its
// response's headers sent while it runs, not with its result.
func TestHTTPLongCallSendsHeaders(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{Deadline: 3 * time.Second}, nil)
	h.deploy(t, "core", "core.wasm")
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{})
	sid := openSession(t, nil, ts.URL)
	resp := postMCP(t, nil, ts.URL, sid, loopCall("1"))
	defer resp.Body.Close()
	running := h.srv.InFlight()
	body, _ := io.ReadAll(resp.Body)
	if running != 1 {
		t.Errorf("the headers came when %d calls ran, want the call still running", running)
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), fmt.Sprint(mcpserve.CodeDeadline)) {
		t.Errorf("the call: %s %s", resp.Status, body)
	}
}

// TestHTTPBatchRefusedFrom20250618: a session of protocol 2025-06-18 or
// later refuses a batch, as over stdio, even from a client that omits the
// Mcp-Protocol-Version header (on which the SDK took it as 2025-03-26).
func TestHTTPBatchRefusedFrom20250618(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{})
	sid := openSession(t, nil, ts.URL)
	status, _, msgs := exchange(t, ts.URL, sid, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`)
	if status != http.StatusBadRequest || len(msgs) != 1 || decodeRPC(t, msgs[0]).Error == nil ||
		!strings.Contains(decodeRPC(t, msgs[0]).Error.Message, "not supported in protocol "+legacy) {
		t.Errorf("a batch at %s: %d %q", legacy, status, msgs)
	}
}

// TestHTTPBatchOfCalls: a batch's calls (protocol 2025-03-26) are
// answered in one stream, each with its id, a cancelled one not at all.
func TestHTTPBatchOfCalls(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{Deadline: 3 * time.Second}, nil)
	h.deploy(t, "core", "core.wasm")
	h.deploy(t, "echo", "echo.wasm")
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{})
	sid := oldSession(t, ts.URL)
	var wg sync.WaitGroup
	wg.Add(1)
	var msgs []string
	go func() {
		defer wg.Done()
		_, _, msgs = exchange(t, ts.URL, sid, `[`+loopCall(`"x"`)+`,{"jsonrpc":"2.0","id":2.5,"method":"tools/call","params":{"name":"echo_echo","arguments":{}}}]`,
			"Mcp-Protocol-Version", "2025-03-26")
	}()
	waitInFlight(h.srv)
	exchange(t, ts.URL, sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x"}}`, "Mcp-Protocol-Version", "2025-03-26")
	wg.Wait()
	if len(msgs) != 1 || string(decodeRPC(t, msgs[0]).ID) != "2.5" {
		t.Errorf("the batch: %q, want the echo's response alone", msgs)
	}
}

// TestHTTPBatchBounded: over HTTP as over stdio, a batch has at most 100
// elements: past it, 400 and -32600 naming the bound.
func TestHTTPBatchBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{})
	sid := oldSession(t, ts.URL)
	if status, _, msgs := exchange(t, ts.URL, sid, pings(0, 100), "Mcp-Protocol-Version", "2025-03-26"); status != http.StatusOK || len(msgs) != 100 {
		t.Errorf("a batch of 100: %d, %d responses", status, len(msgs))
	}
	status, _, msgs := exchange(t, ts.URL, sid, pings(0, 101), "Mcp-Protocol-Version", "2025-03-26")
	if status != http.StatusBadRequest || len(msgs) != 1 {
		t.Fatalf("a batch of 101: %d, %d responses", status, len(msgs))
	}
	if m := decodeRPC(t, msgs[0]); m.Error == nil || m.Error.Code != -32600 || !strings.Contains(m.Error.Message, "100") {
		t.Errorf("a batch of 101: %s, want -32600 naming the bound", msgs[0])
	}
}

// newProtocolCall is a call of protocol 2026-07-28 (stateless only), with
// the _meta and headers it needs.
func newProtocolCall(id, tool string) (string, []string) {
	body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":{},"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}}}`
	return body, []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", tool}
}

// TestHTTPStatusOverrideAfterHeaders: at protocol 2026-07-28 the SDK answers
// some errors (-32602 here: the program was removed while its call waited)
// with an HTTP status of their own; when berm has sent the headers of a long
// call already, the error still reaches the client, with its own id, as an
// event of the stream. (It went out as raw JSON, not an event, with berm's
// token for an id.)
func TestHTTPStatusOverrideAfterHeaders(t *testing.T) {
	t.Parallel()
	q := newQueued(t, time.Minute, mcpserve.HTTPConfig{Stateless: true})
	addr := strings.TrimPrefix(q.url, "http://")
	busy := rawRequest(t, addr, "POST", "/mcp", "", len(loopCall("1")), loopCall("1"))
	q.inFlight(t, 1)
	body, header := newProtocolCall(`"mine-\u00e9"`, "core_busy")
	req, _ := http.NewRequest(http.MethodPost, q.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req) // its headers come while it waits
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := q.h.svc.Remove(t.Context(), "core", false); err != nil {
		t.Fatal(err)
	}
	busy.Close() // stateless: the call whose POST went ends, and frees the worker
	data, _ := io.ReadAll(resp.Body)
	var msgs []string
	for _, line := range strings.Split(string(data), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			msgs = append(msgs, d)
		}
	}
	if resp.StatusCode != http.StatusOK || len(msgs) != 1 {
		t.Fatalf("the call of a removed program: %s %q, want one event", resp.Status, data)
	}
	m := decodeRPC(t, msgs[0])
	if string(m.ID) != `"mine-\u00e9"` || m.Error == nil || m.Error.Code != -32602 {
		t.Errorf("the call of a removed program: %s, want -32602 with the client's id", msgs[0])
	}
}

// TestHTTPRefusalsInJSONRPC: what the SDK refused of an MCP POST in plain
// text (a protocol version it does not know, the wrong Content-Type or
// Accept, Last-Event-ID, a batch refused by its header) and an unknown
// session are answered in JSON-RPC, -32600, with the same status.
func TestHTTPRefusalsInJSONRPC(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{})
	sid, old := openSession(t, nil, ts.URL), oldSession(t, ts.URL)
	stateless := newHarness(t, runtime.Limits{}, nil).serveHTTP(t, mcpserve.HTTPConfig{Stateless: true})
	const ping = `{"jsonrpc":"2.0","id":5,"method":"ping"}`
	for _, c := range []struct {
		name, base, session, body string
		header                    []string
		status                    int
		want                      string
	}{
		{"an unknown protocol version", ts.URL, sid, ping, []string{"Mcp-Protocol-Version", "1999-01-01"}, 400, "1999-01-01"},
		{"Last-Event-ID", ts.URL, sid, ping, []string{"Last-Event-ID", "x_1"}, 400, "Last-Event-ID"},
		{"the wrong Content-Type", ts.URL, sid, ping, []string{"Content-Type", "text/plain"}, 415, "application/json"},
		{"the wrong Accept", ts.URL, sid, ping, []string{"Accept", "application/json"}, 400, "text/event-stream"},
		{"a batch with a later version's header", ts.URL, old, "[" + ping + "]", []string{"Mcp-Protocol-Version", "2025-11-25"}, 400, "2025-11-25"},
		{"a stateless batch with a later version's header", stateless.URL, "", "[" + ping + "]", []string{"Mcp-Protocol-Version", "2025-06-18"}, 400, "2025-06-18"},
		{"an unknown session", ts.URL, "no-such-session", ping, nil, 404, "initialize"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, ct, msgs := exchange(t, c.base, c.session, c.body, c.header...)
			if status != c.status || ct != "application/json" || len(msgs) != 1 {
				t.Fatalf("%d %s %q, want %d and a JSON-RPC error", status, ct, msgs, c.status)
			}
			if m := decodeRPC(t, msgs[0]); m.Error == nil || m.Error.Code != -32600 || !strings.Contains(m.Error.Message, c.want) {
				t.Errorf("%s, want -32600 naming %q", msgs[0], c.want)
			}
		})
	}
}
