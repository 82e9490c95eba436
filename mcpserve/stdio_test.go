package mcpserve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
)

// stdioMsg is one line the server wrote, as much of it as the tests look at.
type stdioMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result *struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// runStdio serves input over stdio until RunStdio returns, calling during
// (if any) meanwhile, and returns what the server wrote.
func runStdio(t *testing.T, srv *mcpserve.Server, ctx context.Context, input io.Reader, drain time.Duration, during func()) []stdioMsg {
	t.Helper()
	var out lockedBuffer
	done := make(chan error, 1)
	go func() { done <- srv.RunStdio(ctx, input, &out, drain) }()
	if during != nil {
		during()
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunStdio: %v", err)
		}
	case <-time.After(drain + 20*time.Second):
		t.Fatalf("RunStdio did not return; it wrote:\n%s", out.String())
	}
	var msgs []stdioMsg
	lines := bufio.NewScanner(strings.NewReader(out.String()))
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		var m stdioMsg
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("not JSON on stdout: %q", lines.Text())
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// replies are the responses among msgs, by id (as its JSON), failing the test
// on an id answered twice.
func replies(t *testing.T, msgs []stdioMsg) map[string]stdioMsg {
	t.Helper()
	byID := map[string]stdioMsg{}
	for _, m := range msgs {
		if m.Method != "" {
			continue // a notification
		}
		if _, dup := byID[string(m.ID)]; dup {
			t.Errorf("id %s answered twice", m.ID)
		}
		byID[string(m.ID)] = m
	}
	return byID
}

const stdioInit = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + legacy + `","capabilities":{},"clientInfo":{"name":"test","version":"0"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
`

// TestStdioAnswersEveryRequestBeforeEOF: a client that writes its requests
// and closes stdin at once (printf ... | berm serve --stdio) gets a response
// to each, the calls running concurrently, before RunStdio returns. The end
// of input used to cancel the calls in flight, in some runs and not others,
// hence the repetitions.
func TestStdioAnswersEveryRequestBeforeEOF(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	h.deploy(t, "echo", "echo.wasm")
	h.start(t)
	for _, n := range []int{1, 20} {
		t.Run(fmt.Sprintf("%d calls", n), func(t *testing.T) {
			var in strings.Builder
			in.WriteString(stdioInit)
			want := map[string]string{`0`: ""} // id -> the call's text
			for i := range n {
				id := fmt.Sprint(i + 1)
				if i%2 == 1 {
					id = fmt.Sprintf(`"call-%d"`, i+1) // ids of both kinds
				}
				fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"echo_echo","arguments":{"i":%d}}}`+"\n", id, i)
				want[id] = fmt.Sprintf(`{"i":%d}`, i)
			}
			for run := range 50 {
				got := replies(t, runStdio(t, h.srv, context.Background(), strings.NewReader(in.String()), time.Second, nil))
				if len(got) != len(want) {
					t.Fatalf("run %d: %d replies to %d requests: %v", run, len(got), len(want), keys(got))
				}
				for id, text := range want {
					r, ok := got[id]
					switch {
					case !ok:
						t.Fatalf("run %d: no reply to id %s", run, id)
					case r.Error != nil || r.Result == nil || r.Result.IsError:
						t.Fatalf("run %d: id %s: error %+v, result %+v", run, id, r.Error, r.Result)
					case text != "" && (len(r.Result.Content) != 1 || r.Result.Content[0].Text != text):
						t.Fatalf("run %d: id %s: %+v, want %s", run, id, r.Result.Content, text)
					}
				}
			}
		})
	}
}

// waitInFlight waits a while for a call to run, which the test then checks.
func waitInFlight(srv *mcpserve.Server) {
	for start := time.Now(); srv.InFlight() == 0 && time.Since(start) < 10*time.Second; {
		time.Sleep(time.Millisecond)
	}
}

func keys(m map[string]stdioMsg) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestStdioSlowCallAnsweredAfterEOF: a call that runs to its deadline long
// after stdin ended still gets its response, with drain as berm serve sets
// it (the call deadline), and notifications written meanwhile (log lines,
// tools/list_changed) neither block it nor are lost.
func TestStdioSlowCallAnsweredAfterEOF(t *testing.T) {
	t.Parallel()
	const deadline = time.Second
	h := newHarness(t, runtime.Limits{Deadline: deadline}, nil)
	h.deploy(t, "core", "core.wasm")
	h.start(t)
	input := stdioInit +
		`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"info"}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"core_loop","arguments":{}}}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"core_log","arguments":{}}}` + "\n"
	start := time.Now()
	msgs := runStdio(t, h.srv, context.Background(), strings.NewReader(input), deadline, func() {
		// Once a call runs (stdin long read to its end), a deploy changes
		// the tools, and the server tells the client while the loop runs.
		waitInFlight(h.srv)
		h.deploy(t, "echo", "echo.wasm")
	})
	if took := time.Since(start); took < deadline {
		t.Errorf("RunStdio returned after %v, before the loop's deadline", took)
	}
	got := replies(t, msgs)
	if r := got[`2`]; r.Error == nil || r.Error.Code != mcpserve.CodeDeadline {
		t.Errorf("the loop: %+v, want the deadline error %d; replies %v", r.Error, mcpserve.CodeDeadline, keys(got))
	}
	if r := got[`3`]; r.Result == nil || len(r.Result.Content) != 1 || r.Result.Content[0].Text != "logged" {
		t.Errorf("core_log: %+v", r)
	}
	if len(got) != 4 {
		t.Errorf("%d replies to 4 requests: %v", len(got), keys(got))
	}
	var logs, changed int
	for _, m := range msgs {
		switch m.Method {
		case "notifications/message":
			logs++
		case "notifications/tools/list_changed":
			changed++
		}
	}
	// The SDK handles requests concurrently, so logging/setLevel may take
	// effect after core_log ran (then nothing is logged, as MCP says); what
	// may never happen is half of its lines.
	if (logs != 2 && logs != 0) || changed == 0 {
		t.Errorf("%d log messages (want 2, or 0 if setLevel came late) and %d tools/list_changed (want some)", logs, changed)
	}
}

// TestStdioOverLimitLine: a line over the limit gets an error addressed to
// its request's id when the start of the line holds that id unambiguously,
// id null otherwise; the next line is answered.
func TestStdioOverLimitLine(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	h.start(t)
	pad := bytes.Repeat([]byte("x"), mcp.DefaultMaxLineLength) // the SDK's transport's limit, as berm's
	tests := []struct {
		name, head, tail string // the line is head, pad, tail
		id               string
	}{
		{"number id first", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo_echo","arguments":{"pad":"`, `"}}}`, `7`},
		{"string id after the method", `{"jsonrpc":"2.0","method":"tools/call","id":"big-1","params":{"arguments":{"pad":"`, `"}}}`, `"big-1"`},
		{"id beyond the cut", `{"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"pad":"`, `"}},"id":8}`, `null`},
		{"only a nested id kept", `{"jsonrpc":"2.0","method":"tools/call","params":{"id":5,"arguments":{"pad":"`, `"}},"id":9}`, `null`},
		{"two ids", `{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"pad":"`, `"}}`, `null`},
		{"id not an integer", `{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"pad":"`, `"}}`, `1.5`},
		{"id a long number", `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"tools/call","params":{"pad":"`, `"}}`, `123456789012345678901234567890`},
		{"id with escapes", `{"jsonrpc":"2.0","id":"\u0041\n","method":"tools/call","params":{"pad":"`, `"}}`, `"\u0041\n"`},
		{"a batch", `[{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"pad":"`, `"}}]`, `null`},
		{"a notification", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"pad":"`, `"}}`, `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			input := io.MultiReader(
				strings.NewReader(stdioInit+tt.head),
				bytes.NewReader(pad),
				strings.NewReader(tt.tail+"\n"+`{"jsonrpc":"2.0","id":"after","method":"ping"}`+"\n"))
			got := replies(t, runStdio(t, h.srv, context.Background(), input, time.Second, nil))
			r, ok := got[tt.id]
			if !ok || r.Error == nil {
				t.Fatalf("no error with id %s; replies %v", tt.id, keys(got))
			}
			if r.Error.Code != -32600 || !strings.Contains(r.Error.Message, "over the limit") {
				t.Errorf("error %+v, want -32600 over the limit", r.Error)
			}
			if _, ok := got[`"after"`]; !ok {
				t.Errorf("the line after it was not answered; replies %v", keys(got))
			}
			if len(got) != 3 {
				t.Errorf("replies %v, want those to 0, %s and \"after\"", keys(got), tt.id)
			}
		})
	}
}

// TestStdioCancelFinishesCalls: on SIGTERM (ctx done) with stdin still open,
// the call in flight is answered and RunStdio returns.
func TestStdioCancelFinishesCalls(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	h.deploy(t, "core", "core.wasm")
	h.start(t)
	inR, inW := io.Pipe()
	defer inW.Close()
	go io.WriteString(inW, stdioInit+`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"core_busy","arguments":{}}}`+"\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := replies(t, runStdio(t, h.srv, ctx, inR, 5*time.Second, func() {
		waitInFlight(h.srv)
		cancel()
	}))
	if r := got[`1`]; r.Result == nil || len(r.Result.Content) != 1 || r.Result.Content[0].Text != "ok" {
		t.Errorf("core_busy: %+v; replies %v", r, keys(got))
	}
}

// TestStdioGivesUpWhenStdoutBreaks: with stdout gone as well as stdin, no
// response can be written, and RunStdio returns without waiting out drain.
func TestStdioGivesUpWhenStdoutBreaks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{Deadline: time.Second}, nil)
	h.deploy(t, "core", "core.wasm")
	h.start(t)
	input := stdioInit + `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"core_loop","arguments":{}}}` + "\n"
	const drain = time.Minute
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- h.srv.RunStdio(context.Background(), strings.NewReader(input), brokenPipe{}, drain) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RunStdio waits for responses it cannot write")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("RunStdio returned after %v", took)
	}
}

type brokenPipe struct{}

func (brokenPipe) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

// oddIDs are ids the SDK could not echo: it kept a number as an int64 (or
// refused it, past a float64), and a string like berm's own tokens.
var oddIDs = []string{`1e308`, `1e400`, `123456789012345678901234567890`, `1.5`, `-0`, `7E+2`, `"a\u0041"`, `"<&>"`, `"berm-id-1"`}

// loopCall is a call of core_loop, which runs to its deadline.
func loopCall(id string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"core_loop","arguments":{}}}`
}

// TestStdioEchoesIDs: every id comes back exactly as sent, its JSON text
// (escapes and all), in results and in errors.
func TestStdioEchoesIDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	h.deploy(t, "echo", "echo.wasm")
	h.start(t)
	var in strings.Builder
	// Not stdioInit's id 0: -0 is the same id, refused while initialize is
	// in flight, which it may still be when the calls are read.
	in.WriteString(strings.Replace(stdioInit, `"id":0,`, `"id":"init",`, 1))
	for i, id := range oddIDs {
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"echo_echo","arguments":{"i":%d}}}`+"\n", id, i)
	}
	fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":"\u00e9\n","method":"no/such"}`+"\n")
	got := replies(t, runStdio(t, h.srv, context.Background(), strings.NewReader(in.String()), time.Second, nil))
	for i, id := range oddIDs {
		r, ok := got[id]
		if !ok || r.Result == nil || len(r.Result.Content) != 1 || r.Result.Content[0].Text != fmt.Sprintf(`{"i":%d}`, i) {
			t.Errorf("id %s: %+v (%v); replies %v", id, r, ok, keys(got))
		}
	}
	if r, ok := got[`"\u00e9\n"`]; !ok || r.Error == nil || r.Error.Code != -32601 {
		t.Errorf(`an error to id "\u00e9\n": %+v; replies %v`, r, keys(got))
	}
}

// TestStdioDuplicateInFlight: a call whose id is that of a call in flight
// is answered with an error (the SDK left it unanswered), whatever the
// form of the number; the one in flight is answered as ever.
func TestStdioDuplicateInFlight(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{Deadline: time.Second}, nil)
	h.deploy(t, "core", "core.wasm")
	h.start(t)
	input := stdioInit + loopCall("7") + "\n" +
		`{"jsonrpc":"2.0","id":7,"method":"ping"}` + "\n" +
		`{"jsonrpc":"2.0","id":7.0,"method":"ping"}` + "\n" +
		`{"jsonrpc":"2.0","id":"7","method":"ping"}` + "\n"
	var lines []stdioMsg
	for _, m := range runStdio(t, h.srv, context.Background(), strings.NewReader(input), time.Second, nil) {
		if m.Method == "" {
			lines = append(lines, m)
		}
	}
	var dups, deadline, strs int
	for _, m := range lines {
		switch {
		case string(m.ID) == `"7"` && m.Result != nil:
			strs++ // another id: a string is not a number
		case m.Error != nil && m.Error.Code == -32600 && (string(m.ID) == "7" || string(m.ID) == "7.0"):
			dups++
		case m.Error != nil && m.Error.Code == mcpserve.CodeDeadline && string(m.ID) == "7":
			deadline++
		}
	}
	if dups != 2 || deadline != 1 || strs != 1 || len(lines) != 5 {
		t.Errorf("%d refused as in flight (want 2), %d deadline (want 1), %d string id (want 1), of %d responses: %+v", dups, deadline, strs, len(lines), lines)
	}
}

// TestStdioCancelled: a call the client cancels gets no response (MCP: a
// receiver should not respond; the SDK sent -32603) and stops, and the end
// of input does not wait for it.
func TestStdioCancelled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{Deadline: time.Minute}, nil)
	h.deploy(t, "core", "core.wasm")
	h.start(t)
	input := stdioInit + loopCall(`1e308`) + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1e308,"reason":"no longer wanted"}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"never sent"}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n"
	start := time.Now()
	got := replies(t, runStdio(t, h.srv, context.Background(), strings.NewReader(input), time.Minute, nil))
	if _, ok := got[`1e308`]; ok {
		t.Errorf("the cancelled call was answered: %+v", got[`1e308`])
	}
	if _, ok := got[`2`]; !ok || len(got) != 2 {
		t.Errorf("replies %v, want those to 0 and 2", keys(got))
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("RunStdio took %v: the cancelled call ran on", took)
	}
}

// TestStdioBatchOfCalls: the calls of a batch run concurrently, and the
// batch is answered once, when the last is (a cancelled one not at all).
func TestStdioBatchOfCalls(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{Deadline: time.Minute}, nil)
	h.deploy(t, "core", "core.wasm")
	h.deploy(t, "echo", "echo.wasm")
	h.start(t)
	inR, inW := io.Pipe()
	var out lockedBuffer
	done := make(chan error, 1)
	go func() { done <- h.srv.RunStdio(context.Background(), inR, &out, time.Minute) }()
	io.WriteString(inW, strings.Replace(stdioInit, legacy, "2025-03-26", 1))
	io.WriteString(inW, `[`+loopCall(`"x"`)+`,{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo_echo","arguments":{}}}]`+"\n")
	waitInFlight(h.srv)
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x"}}`+"\n")
	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("RunStdio did not return: the cancelled call ran on; wrote %s", out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var batch []stdioMsg
	if len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &batch) != nil || len(batch) != 1 || string(batch[0].ID) != "2" {
		t.Errorf("wrote %q, want the initialize response and a batch of the echo's alone", lines)
	}
}

// pings is a batch of n pings, their ids from from on.
func pings(from, n int) string {
	var b []string
	for i := range n {
		b = append(b, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, from+i))
	}
	return "[" + strings.Join(b, ",") + "]"
}

// TestStdioBatchBounded: a batch has at most 100 elements (-32600 naming the
// bound past it: 1 MiB of tools/list asked for 317 MB of responses), and
// the responses it holds until its last call is answered are bounded in
// bytes (twice the result limit): a call's response past them is an error
// naming the bound.
func TestStdioBatchBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{MaxResult: 64 << 10}, nil)
	h.deploy(t, "echo", "echo.wasm")
	h.start(t)
	var calls []string
	for i := range 4 {
		calls = append(calls, fmt.Sprintf(`{"jsonrpc":"2.0","id":"c%d","method":"tools/call","params":{"name":"echo_echo","arguments":{"m":"%s"}}}`, i, strings.Repeat("x", 40<<10)))
	}
	input := strings.Replace(stdioInit, legacy, "2025-03-26", 1) + pings(1000, 100) + "\n" + pings(2000, 101) + "\n" + "[" + strings.Join(calls, ",") + "]\n"
	var out lockedBuffer
	if err := h.srv.RunStdio(context.Background(), strings.NewReader(input), &out, time.Minute); err != nil {
		t.Fatal(err)
	}
	var hundred, over, answers bool
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var one stdioMsg
		var batch []stdioMsg
		switch {
		case json.Unmarshal([]byte(line), &one) == nil:
			if one.Error != nil {
				if over = one.Error.Code == -32600 && strings.Contains(one.Error.Message, "100"); !over {
					t.Errorf("an error: %.300s", line)
				}
			}
		case json.Unmarshal([]byte(line), &batch) != nil:
			t.Errorf("not JSON: %.300s", line)
		case len(batch) == 100:
			hundred = true
		case len(batch) == 4:
			answers = true
			refused := 0
			for _, a := range batch {
				if a.Error != nil && a.Error.Code == -32600 && strings.Contains(a.Error.Message, "131072") {
					refused++
				}
			}
			if refused == 0 || len(line) > 160<<10 {
				t.Errorf("a batch whose responses are 4 × 80 KiB: %d bytes, %d refused, want those past 128 KiB refused", len(line), refused)
			}
		}
	}
	if !hundred || !over || !answers {
		t.Errorf("a batch of 100 answered %v, of 101 refused %v, of 4 calls answered %v; wrote %.500s", hundred, over, answers, out.String())
	}
}
