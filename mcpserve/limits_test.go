package mcpserve_test

import (
	"bufio"
	"bytes"
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
	t.Parallel()
	h := newHarness(t, runtime.Limits{MaxArgs: 16 << 20, MaxResult: 16 << 20}, nil)
	h.deploy(t, "echo", "echo.wasm")
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{MaxBody: 17 << 20, WriteTimeout: 200 * time.Millisecond})
	<-h.srv.Loaded()
	id := openSession(t, nil, ts.URL)
	// A result of 15 MiB (its text alone: structured content stops at
	// 1 MiB), more than the kernel's buffers on both ends hold, once the
	// client's stops growing: of 8 MiB, all of it could be buffered, the
	// handler return and the connection be kept for the next request.
	body := bigEcho(2, 15<<20)
	conn := rawRequest(t, ts.Listener.Addr().String(), "POST", "/mcp", id, len(body), body)
	conn.(*net.TCPConn).SetReadBuffer(256 << 10)
	// The headers come first, once the call has run 50 ms; the result's
	// event begins with its write, which then blocks while the client
	// stops reading (under the race detector its encoding takes seconds).
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	var seen []byte
	for !bytes.Contains(seen, []byte(`"jsonrpc"`)) {
		buf := make([]byte, 1024)
		k, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("after %q: %v", seen, err)
		}
		seen = append(seen, buf[:k]...)
	}
	first := len(seen)
	time.Sleep(2 * time.Second)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, conn)
	n += int64(first)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || n >= 15<<20 {
		t.Fatalf("read %d bytes (%v): the server still held the response for a client that did not read", n, err)
	}
}

// TestHTTPReadTimeoutTrickledBody: a body that does not arrive within the
// read timeout is refused in JSON (408), on MCP as on the control API.
func TestHTTPReadTimeoutTrickledBody(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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

// TestHTTPMaxSessions: at the limit, a flood of initialize requests no
// longer locks new clients out (it held every session for the 30 minutes
// until they idled out): each new session ends an idle one, a session that
// never went past the handshake before one used again and again, so the
// client in use keeps its session and the newest client gets one. The session ended gets
// 404, on which MCP has a client initialize anew.
func TestHTTPMaxSessions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	const grace = 100 * time.Millisecond
	ts := h.serveHTTP(t, mcpserve.WithSessionGrace(mcpserve.HTTPConfig{MaxSessions: 3, Metrics: true}, grace))
	inUse := openSession(t, nil, ts.URL)
	ping(t, ts.URL, inUse, http.StatusOK)
	ping(t, ts.URL, inUse, http.StatusOK)
	time.Sleep(grace) // established
	var flood []string
	for range 10 {
		flood = append(flood, openSession(t, nil, ts.URL))
	}
	ping(t, ts.URL, inUse, http.StatusOK)
	openSession(t, nil, ts.URL)
	ping(t, ts.URL, flood[0], http.StatusNotFound)
	ping(t, ts.URL, inUse, http.StatusOK)
	fams := scrape(t, ts.URL, "")
	if got := gauge(t, fams, "berm_mcp_sessions_replaced_total"); got != 9 {
		t.Errorf("berm_mcp_sessions_replaced_total = %v, want 9 (11 sessions opened into 2 places)", got)
	}
}

// ping pings within a session and checks the status of the answer.
func ping(t *testing.T, base, session string, want int) {
	t.Helper()
	resp := postMCP(t, nil, base, session, `{"jsonrpc":"2.0","id":"ping","method":"ping"}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("ping in session %s: %s, want %d", session, resp.Status, want)
	}
}

// TestHTTPMaxSessionsAllBusy: only when every session has a request in
// flight is a new one refused, in JSON, 503 with Retry-After; the calls in
// flight are answered.
func TestHTTPMaxSessionsAllBusy(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{Deadline: 3 * time.Second}, nil)
	h.deploy(t, "core", "core.wasm")
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{MaxSessions: 2})
	var wg sync.WaitGroup
	for range 2 {
		id := openSession(t, nil, ts.URL)
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := postMCP(t, nil, ts.URL, id, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"core_loop","arguments":{}}}`)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(body), `"code":-32011`) {
				t.Errorf("the call in flight: %s %s", resp.Status, body)
			}
		}()
	}
	for start := time.Now(); h.srv.InFlight() < 2 && time.Since(start) < 10*time.Second; {
		time.Sleep(time.Millisecond)
	}
	resp := postMCP(t, nil, ts.URL, "", initBody)
	if resp.Header.Get("Retry-After") == "" {
		t.Error("a refused session has no Retry-After")
	}
	body := refused(t, resp, http.StatusServiceUnavailable, "too_many_sessions")
	if want := "sessions: 2 open, the server's limit, each with a request in flight; retry later"; body != want {
		t.Errorf("the refusal says %q, want %q", body, want)
	}
	wg.Wait()
	openSession(t, nil, ts.URL)
}

// TestHTTPSessionIdle: a session without requests for the idle time ends
// (404 to its next request, as MCP says).
func TestHTTPSessionIdle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{SessionIdle: 200 * time.Millisecond})
	id := openSession(t, nil, ts.URL)
	time.Sleep(time.Second)
	ping(t, ts.URL, id, http.StatusNotFound)
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

// TestHTTPBodiesHeldBounded: the request bodies held at once, MCP's and
// uploads alike, are bounded in bytes (twice the image limit by default):
// past it a request is refused, 503 with Retry-After (300 unfinished bodies
// of 1 MiB held 385 MB, eight uploads of 63 MiB 1.3 GB); a body that ends
// gives its bytes back. A body is charged as it arrives: connections that
// send their headers alone hold nothing (2,100 of them, announcing 1 MiB,
// refused every client for a minute); and a body of at most 4 KiB (an
// initialize, a ping) is never refused by the bound.
func TestHTTPBodiesHeldBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{MaxImage: 1 << 20, MaxBody: 1 << 20})
	addr := ts.Listener.Addr().String()
	// A ping of 8 KiB, and one of a few bytes.
	ping := func(size int) *http.Response {
		msg := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
		return postMCP(t, nil, ts.URL, "", msg+strings.Repeat(" ", max(0, size-len(msg))))
	}
	// 100 connections that announce 1 MiB and send nothing more.
	for range 100 {
		rawRequest(t, addr, "POST", "/mcp", "", 1<<20, "")
	}
	time.Sleep(100 * time.Millisecond) // for the server to read their headers
	if resp := ping(8 << 10); resp.StatusCode == http.StatusServiceUnavailable {
		t.Fatalf("a ping of 8 KiB refused beside 100 connections that sent no body: %s", refused(t, resp, http.StatusServiceUnavailable, "busy"))
	} else {
		resp.Body.Close()
	}
	// Two bodies of 1 MiB, all sent but their last byte.
	most := strings.Repeat(" ", 1<<20-1)
	held := []net.Conn{
		rawRequest(t, addr, "POST", "/mcp", "", 1<<20, most),
		rawRequest(t, addr, "PUT", "/v1/programs/big", "", 1<<20, most),
	}
	var resp *http.Response
	waitFor(t, "a request refused while bodies of 2 MiB are held", func() bool {
		if resp = ping(8 << 10); resp.StatusCode == http.StatusServiceUnavailable {
			return true
		}
		resp.Body.Close()
		return false
	})
	if resp.Header.Get("Retry-After") == "" {
		t.Errorf("no Retry-After")
	}
	if msg := refused(t, resp, http.StatusServiceUnavailable, "busy"); !strings.Contains(msg, "--max-body-memory") {
		t.Errorf("%q, want it to name the bound's flag", msg)
	}
	req, _ := http.NewRequest(http.MethodPut, ts.URL+"/v1/programs/more", strings.NewReader("\x00asm"+strings.Repeat("\x00", 8<<10)))
	req.Header.Set("Content-Type", "application/wasm")
	put, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	refused(t, put, http.StatusServiceUnavailable, "busy")
	// (Without a session, what is not refused is answered 400.)
	if resp := ping(0); resp.StatusCode == http.StatusServiceUnavailable {
		t.Errorf("a ping of a few bytes refused at the bound: %s", refused(t, resp, http.StatusServiceUnavailable, "busy"))
	} else {
		resp.Body.Close()
	}
	held[0].Close()
	waitFor(t, "the bytes of a body that ended given back", func() bool {
		resp := ping(8 << 10)
		resp.Body.Close()
		return resp.StatusCode != http.StatusServiceUnavailable
	})
}
