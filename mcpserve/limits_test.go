package mcpserve_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
)

// postMCP posts one JSON-RPC message to /mcp, within a session if given.
func postMCP(t *testing.T, client *http.Client, base, session, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// openSession initializes an MCP session over plain HTTP.
func openSession(t *testing.T, client *http.Client, base string) string {
	t.Helper()
	resp := postMCP(t, client, base, "", initBody)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %s, session %q", resp.Status, id)
	}
	resp = postMCP(t, client, base, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %s", resp.Status)
	}
	return id
}

// rawRequest writes an HTTP/1.1 request's head, and as much of its body as
// given, on a connection of its own.
func rawRequest(t *testing.T, addr, method, path, session string, length int, body string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n",
		method, path, addr, length)
	if session != "" {
		head += "Mcp-Session-Id: " + session + "\r\n"
	}
	if _, err := io.WriteString(conn, head+"\r\n"+body); err != nil {
		t.Fatal(err)
	}
	return conn
}

// bigEcho is a call of echo_echo whose result (its arguments, as text and
// as structured content) is twice size.
func bigEcho(id, size int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo_echo","arguments":{"message":"%s"}}}`,
		id, strings.Repeat("x", size))
}

// TestHTTPWriteTimeoutSlowReader: a client that does not read a large
// result no longer holds it, and its connection, beyond the write timeout.
func TestHTTPWriteTimeoutSlowReader(t *testing.T) {
	h := newHarness(t, runtime.Limits{MaxArgs: 16 << 20, MaxResult: 16 << 20}, nil)
	h.deploy(t, "echo", "echo.wasm")
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{MaxBody: 17 << 20, WriteTimeout: 200 * time.Millisecond})
	<-h.srv.Loaded()
	id := openSession(t, nil, ts.URL)
	// 16 MiB: more than the kernel's buffers on both ends hold, once the
	// client's stops growing.
	body := bigEcho(2, 8<<20)
	conn := rawRequest(t, ts.Listener.Addr().String(), "POST", "/mcp", id, len(body), body)
	conn.(*net.TCPConn).SetReadBuffer(256 << 10)
	// The first bytes come with the write of the result, which then blocks
	// while the client stops reading.
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	first, err := conn.Read(make([]byte, 1024))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, conn)
	n += int64(first)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || n >= 16<<20 {
		t.Fatalf("read %d bytes (%v): the server still held the response for a client that did not read", n, err)
	}
}

// TestHTTPReadTimeoutTrickledBody: a body that does not arrive within the
// read timeout is refused in JSON (408), on MCP as on the control API.
func TestHTTPReadTimeoutTrickledBody(t *testing.T) {
	h := newHarness(t, runtime.Limits{}, nil)
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{ReadTimeout: 200 * time.Millisecond})
	for _, route := range []struct{ method, path string }{{"POST", "/mcp"}, {"PUT", "/v1/programs/slow"}} {
		t.Run(route.method+" "+route.path, func(t *testing.T) {
			start := time.Now()
			conn := rawRequest(t, ts.Listener.Addr().String(), route.method, route.path, "", 1000, `{"jsonrpc"`)
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			req, _ := http.NewRequest(route.method, ts.URL+route.path, nil)
			resp, err := http.ReadResponse(bufio.NewReader(conn), req)
			if err != nil {
				t.Fatalf("no response to a trickled body in %v: %v", time.Since(start), err)
			}
			refused(t, resp, http.StatusRequestTimeout, "timeout")
		})
	}
	if stored, _ := h.deployed(t); len(stored) != 0 {
		t.Fatalf("deployed %v", stored)
	}
}

// TestHTTPStreamOutlivesDeadlines: the bounds are per request body and per
// write, so neither the GET stream of notifications, idle past both, nor a
// call running past both loses its answer; over HTTP/1.1 and HTTP/2 (where
// a deadline that passes resets a stream), through RunHTTP's own server.
func TestHTTPStreamOutlivesDeadlines(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			h := newHarness(t, runtime.Limits{Deadline: 500 * time.Millisecond}, nil)
			h.deploy(t, "core", "core.wasm")
			h.start(t)
			cfg := mcpserve.HTTPConfig{Addr: "127.0.0.1:0", ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond}
			client, scheme := &http.Client{}, "http"
			if useTLS {
				certFile, keyFile, pool := selfSigned(t)
				cfg.TLSCert, cfg.TLSKey = certFile, keyFile
				client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
				scheme = "https"
			}
			addrs := make(chan net.Addr, 1)
			cfg.Listening = func(a net.Addr) { addrs <- a }
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- h.srv.RunHTTP(ctx, cfg, time.Second) }()
			t.Cleanup(func() { cancel(); <-done })
			base := scheme + "://" + (<-addrs).String()
			proto := 1
			if useTLS {
				proto = 2
			}
			if resp, err := client.Get(base + "/healthz"); err != nil || resp.ProtoMajor != proto {
				t.Fatalf("healthz: %v %v, want HTTP/%d", resp, err, proto)
			}

			changed := make(chan struct{}, 8)
			c := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
			})
			cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: client},
				&mcp.ClientSessionOptions{ProtocolVersion: legacy})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if _, err := call(t, cs, "core_loop", nil); rpcCode(err) != mcpserve.CodeDeadline {
				t.Fatalf("a call of 500ms: %v, want its deadline error", err)
			}
			time.Sleep(300 * time.Millisecond)
			h.deploy(t, "echo", "echo.wasm")
			select {
			case <-changed:
			case <-time.After(5 * time.Second):
				t.Fatal("no tools/list_changed on a stream idle past the deadlines")
			}
		})
	}
}

// TestHTTPMaxSessions: past the limit a new session is refused in JSON,
// 503 with Retry-After; the sessions held still work, and one that ends
// makes room.
func TestHTTPMaxSessions(t *testing.T) {
	h := newHarness(t, runtime.Limits{}, nil)
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{MaxSessions: 3})
	var ids []string
	for range 3 {
		ids = append(ids, openSession(t, nil, ts.URL))
	}
	resp := postMCP(t, nil, ts.URL, "", initBody)
	if resp.Header.Get("Retry-After") == "" {
		t.Error("a refused session has no Retry-After")
	}
	refused(t, resp, http.StatusServiceUnavailable, "too_many_sessions")

	resp = postMCP(t, nil, ts.URL, ids[0], `{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("ping in a session held at the limit: %s", resp.Status)
	}
	req, _ := http.NewRequest(http.MethodDelete, ts.URL+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", ids[0])
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE a session: %v %v", resp, err)
	}
	openSession(t, nil, ts.URL)
}

// TestHTTPSessionIdle: a session without requests for the idle time ends
// (404 to its next request, as MCP says) and makes room for another.
func TestHTTPSessionIdle(t *testing.T) {
	h := newHarness(t, runtime.Limits{}, nil)
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{MaxSessions: 1, SessionIdle: 200 * time.Millisecond})
	id := openSession(t, nil, ts.URL)
	refused(t, postMCP(t, nil, ts.URL, "", initBody), http.StatusServiceUnavailable, "too_many_sessions")
	time.Sleep(time.Second)
	resp := postMCP(t, nil, ts.URL, id, `{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a request in an idle session: %s, want 404", resp.Status)
	}
	openSession(t, nil, ts.URL)
}

// TestMeasureHTTPBounds reports the heap that 40 clients not reading a
// 17 MiB result, and 20,000 initialize requests, leave in use. It only
// measures: BERM_MEASURE=1 go test -run TestMeasureHTTPBounds -v ./mcpserve
func TestMeasureHTTPBounds(t *testing.T) {
	if os.Getenv("BERM_MEASURE") == "" {
		t.Skip("BERM_MEASURE is not set")
	}
	// heap is the heap and stacks in use after a collection, and the
	// process's resident set, in MiB.
	heap := func() string {
		goruntime.GC()
		var m goruntime.MemStats
		goruntime.ReadMemStats(&m)
		rss := "?"
		if status, err := os.ReadFile("/proc/self/status"); err == nil {
			for _, line := range strings.Split(string(status), "\n") {
				if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
					rss = strings.TrimSpace(v)
				}
			}
		}
		return fmt.Sprintf("heap %d MiB, stacks %d MiB, %d goroutines, RSS %s",
			m.HeapInuse>>20, m.StackInuse>>20, goruntime.NumGoroutine(), rss)
	}
	t.Run("slow readers", func(t *testing.T) {
		h := newHarness(t, runtime.Limits{MaxArgs: 16 << 20, MaxResult: 16 << 20}, &mcpserve.Options{MaxConcurrent: 40})
		h.deploy(t, "echo", "echo.wasm")
		ts := h.serveHTTP(t, mcpserve.HTTPConfig{MaxBody: 17 << 20, WriteTimeout: 10 * time.Second})
		<-h.srv.Loaded()
		var ids []string
		for range 40 {
			ids = append(ids, openSession(t, nil, ts.URL))
		}
		t.Logf("before: %s", heap())
		body := bigEcho(2, 15<<19) // a result of 15 MiB
		for _, id := range ids {
			conn := rawRequest(t, ts.Listener.Addr().String(), "POST", "/mcp", id, len(body), body)
			conn.(*net.TCPConn).SetReadBuffer(256 << 10)
		}
		body = ""
		start := time.Now()
		for at := 5 * time.Second; at <= 90*time.Second; at += 5 * time.Second {
			time.Sleep(time.Until(start.Add(at)))
			t.Logf("%v after 40 calls: %s; %d calls running", at, heap(), h.srv.InFlight())
		}
	})
	t.Run("sessions", func(t *testing.T) {
		h := newHarness(t, runtime.Limits{}, nil)
		ts := h.serveHTTP(t, mcpserve.HTTPConfig{})
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
		before := heap()
		var mu sync.Mutex
		codes := map[int]int{}
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < 20000; i += 16 {
					resp := postMCP(t, client, ts.URL, "", initBody)
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					mu.Lock()
					codes[resp.StatusCode]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		t.Logf("20,000 initialize: %v; before: %s; after: %s", codes, before, heap())
	})
}
