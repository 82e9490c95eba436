package mcpserve_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
)

// BenchmarkHTTPCall is the round trip of a tools/call of echo over
// streamable HTTP on loopback, from the Go SDK's client: what berm adds to a
// POST (its checks, the id's token, the rewriting of the response) beside
// the SDK's own handling.
func BenchmarkHTTPCall(b *testing.B) {
	h := newHarness(b, runtime.Limits{}, nil)
	h.deploy(b, "echo", "echo.wasm")
	h.start(b)
	<-h.srv.Loaded()
	ts := httptest.NewServer(h.srv.Handler(mcpserve.HTTPConfig{}))
	b.Cleanup(ts.Close)
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: legacy})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	params := &mcp.CallToolParams{Name: "echo_echo", Arguments: map[string]any{"message": "hi"}}
	for range 100 { // warm up: compile, stacks, pools
		if _, err := cs.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	cpu0, n := processCPU(), 0
	for b.Loop() {
		n++
		if _, err := cs.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/op")
	}
}
