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
		{"id not an integer", `{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"pad":"`, `"}}`, `null`},
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
