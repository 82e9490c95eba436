package mcpserve_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
)

func postLarge(t *testing.T, url, sid string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", legacy)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b
}

func heapInuse() uint64 {
	for range 3 {
		goruntime.GC()
	}
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// A session idle after a large call does not keep the call's arguments: the
// SDK's queue of incoming messages once held each session's last one.
func TestSessionsDoNotKeepLastRequest(t *testing.T) {
	// Not parallel: it measures the heap, which other tests would grow.
	const sessions, size = 8, 4 << 20
	h := newHarness(t, runtime.Limits{MaxArgs: 8 << 20}, nil)
	h.deploy(t, "echo", "echo.wasm")
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{MaxBody: 8 << 20})
	<-h.srv.Loaded()
	url := ts.URL + "/mcp"
	base := heapInuse()
	msg := strings.Repeat("x", size)
	for i := range sessions {
		resp, b := postLarge(t, url, "", []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+legacy+`","capabilities":{},"clientInfo":{"name":"r","version":"1"}}}`))
		sid := resp.Header.Get("Mcp-Session-Id")
		if sid == "" {
			t.Fatalf("no session: %d %s", resp.StatusCode, b)
		}
		postLarge(t, url, sid, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
		call, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call",
			"params": map[string]any{"name": "echo_echo", "arguments": map[string]any{"message": msg}}})
		resp, b = postLarge(t, url, sid, call)
		if resp.StatusCode != http.StatusOK || len(b) < size {
			t.Fatalf("call %d: %d %.300s", i, resp.StatusCode, b)
		}
	}
	after := heapInuse()
	// Held, each session would keep its size; a quarter of one is slack.
	if after > base && after-base > size*sessions/4 {
		t.Fatalf("heap grew %d MiB over %d idle sessions after %d MiB calls: the sessions keep their last request",
			(after-base)>>20, sessions, size>>20)
	}
}
