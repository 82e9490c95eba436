package mcpserve_test

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
)

// queued is a server of one call at a time (MaxConcurrent 1: four calls may
// wait, one per HTTP session) whose log the tests read.
type queued struct {
	h    *harness
	logs *lockedBuffer
	url  string
}

func newQueued(t *testing.T, deadline time.Duration, cfg mcpserve.HTTPConfig) *queued {
	t.Helper()
	logs := new(lockedBuffer)
	h := newHarness(t, runtime.Limits{Deadline: deadline}, &mcpserve.Options{
		MaxConcurrent: 1,
		Logger:        slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	h.deploy(t, "core", "core.wasm")
	h.deploy(t, "echo", "echo.wasm")
	ts := h.serveHTTP(t, cfg)
	return &queued{h: h, logs: logs, url: ts.URL}
}

// waitFor polls cond until it holds, failing the test after 30 s: long
// enough for a loaded machine, short of the deadlines the tests use to tell
// a fix from its absence.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); !cond(); time.Sleep(time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("waited 30 s for %s", what)
		}
	}
}

// inFlight waits until n calls are in the server's hands.
func (q *queued) inFlight(t *testing.T, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d calls in flight", n), func() bool { return q.h.srv.InFlight() == n })
}

// callAsync posts a call in session sid and delivers its messages.
func (q *queued) callAsync(t *testing.T, sid, body string) <-chan []string {
	done := make(chan []string, 1)
	go func() { _, _, msgs := exchange(t, q.url, sid, body); done <- msgs }()
	return done
}

// cancel cancels the call id of session sid (a cancelled call frees its
// worker at once, where one left to its deadline would race the deadlines
// of the calls waiting behind it).
func (q *queued) cancel(t *testing.T, sid, id string) {
	t.Helper()
	if status, _, _ := exchange(t, q.url, sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+id+`}}`); status != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %d", status)
	}
}

func echoCall(id string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo_echo","arguments":{}}}`
}

func errorCode(t *testing.T, msgs []string) (int64, string) {
	t.Helper()
	if len(msgs) != 1 {
		t.Fatalf("want one response, got %q", msgs)
	}
	m := decodeRPC(t, msgs[0])
	if m.Error == nil {
		return 0, ""
	}
	return m.Error.Code, m.Error.Message
}

// TestCallsWaitingBounded: past --max-concurrent a call waits, but only so
// many do: a session may have a quarter of the calls waiting, the server
// four times --max-concurrent; past either the call is refused at once
// (CodeBusy), naming the bound. (A session's calls queued without a bound:
// 13,500 from one batch.)
func TestCallsWaitingBounded(t *testing.T) {
	t.Parallel()
	q := newQueued(t, 3*time.Second, mcpserve.HTTPConfig{})
	var sids []string
	for range 5 {
		sids = append(sids, openSession(t, nil, q.url))
	}
	busy := q.callAsync(t, sids[0], loopCall("1"))
	q.inFlight(t, 1)
	waiting := []<-chan []string{q.callAsync(t, sids[0], echoCall("2"))}
	q.inFlight(t, 2)
	code, msg := errorCode(t, <-q.callAsync(t, sids[0], echoCall("3")))
	if code != mcpserve.CodeBusy || !strings.Contains(msg, "this session") {
		t.Errorf("a session's second call waiting: %d %q, want CodeBusy naming the session's bound", code, msg)
	}
	for i, sid := range sids[1:4] {
		waiting = append(waiting, q.callAsync(t, sid, echoCall("4")))
		q.inFlight(t, 3+i)
	}
	// At the server's bound, with every session one call waiting, a fifth
	// session's call is refused: none has more than one more.
	code, msg = errorCode(t, <-q.callAsync(t, sids[4], echoCall("5")))
	if code != mcpserve.CodeBusy || !strings.Contains(msg, "--max-waiting") {
		t.Errorf("a fifth call waiting: %d %q, want CodeBusy naming --max-waiting", code, msg)
	}
	q.cancel(t, sids[0], "1")
	<-busy
	for i, w := range waiting {
		if code, msg := errorCode(t, <-w); code != 0 {
			t.Errorf("waiting call %d: %d %s, want it run", i, code, msg)
		}
	}
}

// TestCallsTakenInTurn: a worker that frees takes the next session's call,
// not the next call of the session that queued the most, so that a batch
// does not starve everyone behind it (a fresh session's echo waited 14 s
// behind 100 calls of one batch).
func TestCallsTakenInTurn(t *testing.T) {
	t.Parallel()
	q := newQueued(t, 3*time.Second, mcpserve.HTTPConfig{})
	a, b := oldSession(t, q.url), openSession(t, nil, q.url)
	busy := q.callAsync(t, a, loopCall("1"))
	q.inFlight(t, 1)
	// One session's batch: two calls of core's echo; a session may have
	// one waiting, so one is refused.
	batch := make(chan []string, 1)
	go func() {
		_, _, msgs := exchange(t, q.url, a, `[`+strings.Replace(echoCall("2"), "echo_echo", "core_echo", 1)+`,`+
			strings.Replace(echoCall("3"), "echo_echo", "core_echo", 1)+`]`, "Mcp-Protocol-Version", "2025-03-26")
		batch <- msgs
	}()
	q.inFlight(t, 2)
	other := q.callAsync(t, b, echoCall("4"))
	q.inFlight(t, 3)
	q.cancel(t, a, "1")
	<-busy
	<-other
	msgs := <-batch
	// The worker ran the loop, then one call of each session, in the order
	// they were queued (the batch's first), as its log says.
	log := q.logs.String()
	first, second := strings.Index(log, "program=core tool=echo"), strings.Index(log, "program=echo tool=echo")
	if first < 0 || second < 0 || second < first {
		t.Errorf("order of the calls run:\n%s", log)
	}
	refused := 0
	for _, m := range msgs {
		if r := decodeRPC(t, m); r.Error != nil && r.Error.Code == mcpserve.CodeBusy {
			refused++
		}
	}
	if refused != 1 || len(msgs) != 2 {
		t.Errorf("the batch: %q, want one call run and one refused", msgs)
	}
}

// TestCallWaitBoundedByDeadline: a call that waits its whole deadline for a
// worker ends as a deadline without running (the last of 300 waited seven
// minutes).
func TestCallWaitBoundedByDeadline(t *testing.T) {
	t.Parallel()
	logs := new(lockedBuffer)
	h := newHarness(t, runtime.Limits{Deadline: 3 * time.Second, MaxResult: 6 << 20, MaxArgs: 6 << 20}, &mcpserve.Options{
		MaxConcurrent:    1,
		MaxUnsentResults: 4 << 20,
		Logger:           slog.New(slog.NewTextHandler(logs, nil)),
	})
	h.deploy(t, "core", "core.wasm")
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{MaxBody: 7 << 20, WriteTimeout: time.Minute})
	sid := openSession(t, nil, ts.URL)
	// The one worker is held past any deadline: by a result that waits for
	// room behind another that its client does not read.
	for i := range 2 {
		body := strings.Replace(bigEcho(i, 5<<20), "echo_echo", "core_echo", 1)
		conn := rawRequest(t, ts.Listener.Addr().String(), "POST", "/mcp", sid, len(body), body)
		conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	}
	waitFor(t, "both results made", func() bool { return strings.Count(logs.String(), "outcome=result") == 2 })
	_, _, msgs := exchange(t, ts.URL, openSession(t, nil, ts.URL), loopCall("3"))
	code, msg := errorCode(t, msgs)
	if code != mcpserve.CodeDeadline || !strings.Contains(msg, "waited 3s") {
		t.Errorf("a call that waited its deadline: %d %q, want CodeDeadline saying it waited", code, msg)
	}
	if strings.Contains(logs.String(), "ran past") {
		t.Errorf("the call that waited its deadline ran:\n%s", logs)
	}
}

// postAndHangUp posts body in session sid on a connection of its own and
// closes it once n calls are in flight.
func (q *queued) postAndHangUp(t *testing.T, sid, body string, n int) {
	t.Helper()
	conn := rawRequest(t, strings.TrimPrefix(q.url, "http://"), "POST", "/mcp", sid, len(body), body)
	q.inFlight(t, n)
	conn.Close()
}

// TestCallOfPOSTGoneNotStarted: a call still waiting for a worker when its
// POST's connection goes is not run (no one could receive its response: berm
// keeps no events to resume a stream); one already running runs on, MCP's
// rule being that a disconnect is not a cancellation.
func TestCallOfPOSTGoneNotStarted(t *testing.T) {
	t.Parallel()
	q := newQueued(t, 2*time.Second, mcpserve.HTTPConfig{})
	a, b := openSession(t, nil, q.url), openSession(t, nil, q.url)
	running := make(chan struct{})
	go func() {
		q.postAndHangUp(t, a, loopCall("1"), 1)
		close(running)
	}()
	<-running
	q.postAndHangUp(t, b, loopCall("2"), 2)
	q.inFlight(t, 0)
	if n := strings.Count(q.logs.String(), "tool=loop duration="); n != 1 {
		t.Errorf("%d calls of core_loop ran, want 1: the running one, not the one that waited", n)
	}
	if !strings.Contains(q.logs.String(), "tool=loop duration=") || !strings.Contains(q.logs.String(), "outcome=deadline") {
		t.Errorf("the running call did not run to its deadline:\n%s", q.logs)
	}
}

// TestStatelessCallOfPOSTGoneCancelled: without sessions a call's POST is
// its only way back, so a call whose POST's connection goes is cancelled,
// running or not.
func TestStatelessCallOfPOSTGoneCancelled(t *testing.T) {
	t.Parallel()
	q := newQueued(t, time.Minute, mcpserve.HTTPConfig{Stateless: true})
	q.postAndHangUp(t, "", loopCall("1"), 1)
	q.inFlight(t, 0) // a minute before its deadline
	if !strings.Contains(q.logs.String(), "canceled") {
		t.Errorf("the call's log line does not say it was cancelled:\n%s", q.logs)
	}
}

// TestCancelAfterPOSTGone: the id of a call whose POST's connection went
// still names it, so notifications/cancelled stops it (MCP has a client
// cancel that way; berm had forgotten the id with the POST).
func TestCancelAfterPOSTGone(t *testing.T) {
	t.Parallel()
	q := newQueued(t, time.Minute, mcpserve.HTTPConfig{})
	sid := openSession(t, nil, q.url)
	q.postAndHangUp(t, sid, loopCall("77"), 1)
	time.Sleep(100 * time.Millisecond) // the server sees the connection gone
	if status, _, _ := exchange(t, q.url, sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":77}}`); status != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %d", status)
	}
	q.inFlight(t, 0)
}

// TestDeleteEndsSessionCalls: DELETE ends the session's calls at once (it
// waited for them, and they ran to their deadline).
func TestDeleteEndsSessionCalls(t *testing.T) {
	t.Parallel()
	q := newQueued(t, time.Minute, mcpserve.HTTPConfig{})
	sid := openSession(t, nil, q.url)
	call := q.callAsync(t, sid, loopCall("1"))
	q.inFlight(t, 1)
	req, _ := http.NewRequest(http.MethodDelete, q.url+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", sid)
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("DELETE: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE: %s", resp.Status)
	}
	q.inFlight(t, 0)
	<-call
}

// TestEvictionEndsSessionCalls: a session ended for a new one (at
// --max-sessions) has its calls ended: their POSTs are gone, so no one
// could receive them.
func TestEvictionEndsSessionCalls(t *testing.T) {
	t.Parallel()
	q := newQueued(t, time.Minute, mcpserve.HTTPConfig{MaxSessions: 1})
	sid := openSession(t, nil, q.url)
	q.postAndHangUp(t, sid, loopCall("1"), 1)
	time.Sleep(100 * time.Millisecond) // the server sees the connection gone
	openSession(t, nil, q.url)
	q.inFlight(t, 0)
}

// TestResultsUnsentBounded: results not yet written to their clients are
// bounded in bytes (twice the result limit): past it a call's result waits
// for room rather than be encoded, so clients that read nothing hold a
// bounded number of them (20 such held 2.1 GB).
func TestResultsUnsentBounded(t *testing.T) {
	t.Parallel()
	logs := new(lockedBuffer)
	h := newHarness(t, runtime.Limits{MaxResult: 6 << 20, MaxArgs: 6 << 20}, &mcpserve.Options{
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	h.deploy(t, "echo", "echo.wasm")
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{MaxBody: 7 << 20, WriteTimeout: time.Minute})
	sid := openSession(t, nil, ts.URL)
	// Each result is 5 MiB, more than the kernel's buffers take of a
	// client that reads nothing: two fit in 12 MiB, a third waits.
	const clients = 4
	var conns []net.Conn
	for i := range clients {
		body := bigEcho(i, 5<<20)
		conn := rawRequest(t, ts.Listener.Addr().String(), "POST", "/mcp", sid, len(body), body)
		conn.(*net.TCPConn).SetReadBuffer(4 << 10)
		conns = append(conns, conn)
	}
	waitFor(t, "every call run", func() bool { return strings.Count(logs.String(), "msg=call ") == clients })
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered := 0
	for _, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// What a client that reads its first bytes sees: the headers,
			// and the start of its result if that is being written.
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			head, _ := io.ReadAll(io.LimitReader(conn, 64<<10))
			if strings.Contains(string(head), "data: ") {
				mu.Lock()
				answered++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if answered > 2 {
		t.Errorf("%d of %d results of 5 MiB were being written at once, want at most 2 (12 MiB)", answered, clients)
	}
}

// TestCallsWaitingShared: when the server's calls waiting are at their
// bound, a session with none waiting takes the place of the last call of
// the session with the most, which is refused (CodeBusy): one session
// cannot hold every place.
func TestCallsWaitingShared(t *testing.T) {
	t.Parallel()
	logs := new(lockedBuffer)
	h := newHarness(t, runtime.Limits{Deadline: time.Minute}, &mcpserve.Options{
		MaxConcurrent: 1, MaxWaiting: 8, // a session may have two waiting
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	h.deploy(t, "core", "core.wasm")
	h.deploy(t, "echo", "echo.wasm")
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{})
	q := &queued{h: h, logs: logs, url: ts.URL}
	var sids []string
	for range 5 {
		sids = append(sids, openSession(t, nil, q.url))
	}
	busy := q.callAsync(t, sids[0], loopCall("1"))
	q.inFlight(t, 1)
	var waiting []<-chan []string
	for i := range 8 {
		waiting = append(waiting, q.callAsync(t, sids[i/2], echoCall(fmt.Sprint(10+i))))
		q.inFlight(t, 2+i)
	}
	late := q.callAsync(t, sids[4], echoCall("20"))
	// The first session's last call gives its place to the fifth's.
	if code, msg := errorCode(t, <-waiting[1]); code != mcpserve.CodeBusy {
		t.Errorf("the last call of a session with two waiting: %d %q, want CodeBusy", code, msg)
	}
	q.cancel(t, sids[0], "1")
	<-busy
	for i, w := range append(append([]<-chan []string{waiting[0]}, waiting[2:]...), late) {
		if code, msg := errorCode(t, <-w); code != 0 {
			t.Errorf("waiting call %d: %d %q, want it run", i, code, msg)
		}
	}
}
