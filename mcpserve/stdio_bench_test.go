package mcpserve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/runtime"
)

// floorServer is the least a Go SDK server does for the echo: the tool
// answered in Go, served on the SDK's own stdio transport.
func floorServer(ctx context.Context, r, w *os.File) {
	s := mcp.NewServer(&mcp.Implementation{Name: "floor", Version: "0"}, nil)
	s.AddTool(&mcp.Tool{
		Name:        "echo_echo",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {"message": {"type": "string"}}}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}},
			StructuredContent: req.Params.Arguments,
		}, nil
	})
	_ = s.Run(ctx, &mcp.IOTransport{Reader: r, Writer: w})
}

// lineClient speaks MCP over two OS pipes one line at a time, to a server
// that serve runs on the other ends, as a stdio server's parent would: the
// same system calls as berm serve --stdio, in one process for the profiler,
// and a client that allocates next to nothing, so that what the benchmark
// measures is the server's.
type lineClient struct {
	w   *os.File
	r   *bufio.Reader
	out *os.File
}

func newLineClient(tb testing.TB, serve func(ctx context.Context, r, w *os.File)) *lineClient {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	inR, inW, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		serve(ctx, inR, outW)
		outW.Close()
	}()
	tb.Cleanup(func() {
		inW.Close() // the server reads the end of its input
		cancel()
		<-done
		inR.Close()
		outR.Close()
	})
	c := &lineClient{w: inW, r: bufio.NewReader(outR)}
	c.roundTrip(tb, stdioInit[:strings.IndexByte(stdioInit, '\n')+1])
	if _, err := io.WriteString(inW, stdioInit[strings.IndexByte(stdioInit, '\n')+1:]); err != nil {
		tb.Fatal(err)
	}
	return c
}

// roundTrip writes one request line and returns the next line read.
func (c *lineClient) roundTrip(tb testing.TB, line string) []byte {
	if _, err := io.WriteString(c.w, line); err != nil {
		tb.Fatal(err)
	}
	resp, err := c.r.ReadSlice('\n')
	if err != nil {
		tb.Fatal(err)
	}
	return resp
}

// BenchmarkStdioCall is a tools/call of the echo over OS pipes to berm's
// server (the echo program through the runtime) and to the floor (a Go SDK
// server answering in Go). Client and server share a process here, so the
// figures are for profiles, allocations and CPU time, nearly all the
// server's; mcpbench (make bench-mcp) times them as separate processes, with
// a Go SDK client, against the reference server:
//
//	go test ./mcpserve/ -run '^$' -bench StdioCall -benchmem -cpuprofile cpu.out
func BenchmarkStdioCall(b *testing.B) {
	const call = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo_echo","arguments":{"message":"hi"}}}` + "\n"
	want := []byte(`"content":[{"type":"text","text":"{\"message\":\"hi\"}"}]`)
	bench := func(b *testing.B, c *lineClient) {
		for range 100 { // warm up: compile, stacks, pools
			if resp := c.roundTrip(b, call); !bytes.Contains(resp, want) {
				b.Fatalf("echo answered %s", resp)
			}
		}
		b.ReportAllocs()
		cpu0, n := processCPU(), 0
		for b.Loop() {
			n++
			if resp := c.roundTrip(b, call); !bytes.Contains(resp, want) {
				b.Fatalf("echo answered %s", resp)
			}
		}
		// CPU time, the client's and the server's, is steadier than the
		// time per call on a machine that runs other work.
		if cpu := processCPU() - cpu0; cpu > 0 {
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/op")
		}
	}
	b.Run("berm", func(b *testing.B) {
		h := newHarness(b, runtime.Limits{}, nil)
		h.deploy(b, "echo", "echo.wasm")
		h.start(b)
		<-h.srv.Loaded()
		bench(b, newLineClient(b, func(ctx context.Context, r, w *os.File) {
			_ = h.srv.RunStdio(ctx, r, w, time.Second)
		}))
	})
	b.Run("floor", func(b *testing.B) {
		bench(b, newLineClient(b, floorServer))
	})
}
