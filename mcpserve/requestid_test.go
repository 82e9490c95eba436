package mcpserve_test

import (
	"log/slog"
	"regexp"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
)

// requestID is the request id in a result's _meta.
func requestID(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	id, _ := res.Meta[mcpserve.MetaRequestID].(string)
	if !requestIDPattern.MatchString(id) {
		t.Fatalf("_meta = %v: want %q matching %s", res.Meta, mcpserve.MetaRequestID, requestIDPattern)
	}
	return id
}

// TestRequestID: each tools/call result carries, in _meta, a request id of
// its own, and the server's log line for that call carries the same id.
func TestRequestID(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	h := newHarness(t, runtime.Limits{}, &mcpserve.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	h.deploy(t, "echo", "echo.wasm")
	cs := h.connect(t, nil)
	var ids []string
	for range 2 {
		res, err := call(t, cs, "echo_echo", map[string]any{"message": "hi"})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			t.Fatalf("echo_echo failed: %s", text(t, res))
		}
		ids = append(ids, requestID(t, res))
	}
	if ids[0] == ids[1] {
		t.Fatalf("two calls got the same request id %q", ids[0])
	}
	for _, id := range ids {
		line := regexp.MustCompile(`(?m)^.*msg=call request_id=` + regexp.QuoteMeta(id) + ` program=echo tool=echo .*$`)
		if !line.MatchString(logs.String()) {
			t.Errorf("no call line with request_id=%s in the log:\n%s", id, logs.String())
		}
	}
}

// TestRequestIDOnFailure: a program's failure is a result too, with its id.
func TestRequestIDOnFailure(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	h := newHarness(t, runtime.Limits{}, &mcpserve.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	h.deploy(t, "core", "core.wasm")
	cs := h.connect(t, nil)
	res, err := call(t, cs, "core_fail", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError {
		t.Fatalf("core_fail: want isError, got %s", text(t, res))
	}
	id := requestID(t, res)
	if !regexp.MustCompile(`request_id=` + regexp.QuoteMeta(id) + ` .*outcome=failure`).MatchString(logs.String()) {
		t.Errorf("no failure line with request_id=%s in the log:\n%s", id, logs.String())
	}
}
