package mcpserve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata/golden")

// TestGoldenTranscripts pins berm's MCP wire behaviour: each
// testdata/golden/NAME.in.jsonl is sent, one JSON-RPC message per line, to a
// server over stdio, and the responses must equal NAME.out.jsonl (run with
// -update to rewrite them after a deliberate change).
func TestGoldenTranscripts(t *testing.T) {
	t.Parallel()
	inputs, err := filepath.Glob(filepath.Join("testdata", "golden", "*.in.jsonl"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".in.jsonl")
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, runtime.Limits{Deadline: 300 * time.Millisecond}, &mcpserve.Options{Version: "test"})
			h.deploy(t, "core", "core.wasm")
			h.deploy(t, "echo", "echo.wasm")
			h.start(t)
			requests, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got := transcript(t, h.srv, requests)
			out := filepath.Join("testdata", "golden", name+".out.jsonl")
			if *update {
				if err := os.WriteFile(out, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(out)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("the wire differs from %s (run with -update after a deliberate change):\ngot:\n%s\nwant:\n%s", out, got, want)
			}
		})
	}
}

// transcript sends each request line, waiting for the response to every
// request with an id before the next, and returns the responses, each
// re-encoded with sorted keys so that the comparison does not depend on
// field order.
func transcript(t *testing.T, srv *mcpserve.Server, requests []byte) []byte {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.RunStdio(context.Background(), inR, outW, time.Second); outW.Close() }()
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	var got bytes.Buffer
	for _, line := range strings.Split(strings.TrimSpace(string(requests)), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal([]byte(line), &req) == nil && req.ID == nil {
			continue // a notification: no response
		}
		for lines.Scan() {
			// Numbers keep their text: ids come back exactly as sent.
			var msg any
			dec := json.NewDecoder(bytes.NewReader(lines.Bytes()))
			dec.UseNumber()
			if err := dec.Decode(&msg); err != nil {
				t.Fatalf("not JSON on stdout: %q", lines.Text())
			}
			if m, ok := msg.(map[string]any); ok {
				if _, isNotification := m["method"]; isNotification {
					continue // list_changed and the like, timing-dependent
				}
				pinRequestID(t, m)
			}
			if batch, ok := msg.([]any); ok {
				// A batch's responses come in the order they are answered.
				for _, m := range batch {
					if m, ok := m.(map[string]any); ok {
						pinRequestID(t, m)
					}
				}
				sort.Slice(batch, func(i, j int) bool {
					a, _ := json.Marshal(batch[i])
					b, _ := json.Marshal(batch[j])
					return string(a) < string(b)
				})
			}
			b, _ := json.Marshal(msg) // maps marshal with sorted keys
			got.Write(b)
			got.WriteByte('\n')
			break
		}
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Fatalf("RunStdio: %v", err)
	}
	return got.Bytes()
}

// requestIDPattern is a request id: 8 hex characters per process, a counter.
var requestIDPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9]+$`)

// pinRequestID replaces a result's request id, which differs from run to
// run, with REQUEST_ID, once it has the form of one.
func pinRequestID(t *testing.T, msg map[string]any) {
	t.Helper()
	res, _ := msg["result"].(map[string]any)
	meta, _ := res["_meta"].(map[string]any)
	id, ok := meta[mcpserve.MetaRequestID]
	if !ok {
		return
	}
	if s, _ := id.(string); !requestIDPattern.MatchString(s) {
		t.Errorf("request id %v: want %s", id, requestIDPattern)
	}
	meta[mcpserve.MetaRequestID] = "REQUEST_ID"
}
