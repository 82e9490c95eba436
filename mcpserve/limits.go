package mcpserve

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Defaults of the HTTP service's bounds (HTTPConfig).
const (
	// DefaultReadTimeout is the time a request has to send its body: a
	// 64 MiB image at 9 Mbit/s.
	DefaultReadTimeout = time.Minute
	// DefaultWriteTimeout is the time one write of a response (a result, an
	// event of a stream) has to reach the client: a 16 MiB result at
	// 5 Mbit/s.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultMaxSessions bounds the MCP sessions held at once: an idle one
	// holds a goroutine and about 16 KiB.
	DefaultMaxSessions = 1000
	// DefaultSessionIdle is how long a session may go without a request.
	// Claude Code does not open a new session when its own has expired (it
	// reports the 404 as an error), so expiry is kept rare; MaxSessions is
	// what bounds the memory.
	DefaultSessionIdle = 30 * time.Minute
)

// retryAfter is what a client refused a session is told to wait: a slot
// frees when a session ends or idles out, which the server cannot foresee.
const retryAfter = 60 * time.Second

// withDeadlines bounds the time a request holds its connection on the
// client's account: readTimeout to send its body, writeTimeout for each
// write of its response to reach the client.
//
// Both are per request, not http.Server's ReadTimeout and WriteTimeout. The
// server's WriteTimeout runs from the end of the request's headers, so it
// would cut the GET /mcp stream of notifications and any call running longer
// than it. Its ReadTimeout stays on the connection after the body is read:
// net/http's background read (which watches for the client hanging up) then
// fails, which cancels the request's context, ending that same stream.
//
// The write deadline is set before each write and cleared after it, so a
// stream may stay idle as long as it likes but every event must be taken
// within writeTimeout; on HTTP/2 a deadline that passes even without a write
// in progress resets the stream.
func withDeadlines(readTimeout, writeTimeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		// A deadline the previous response on this connection left must not
		// cut net/http's own writes for this one (100 Continue).
		rc.SetWriteDeadline(time.Time{})
		// Without a body the background read starts at once, and a deadline
		// would fail it.
		if r.Body != nil && r.Body != http.NoBody {
			rc.SetReadDeadline(time.Now().Add(readTimeout))
			r.Body = &readDeadline{ReadCloser: r.Body, rc: rc}
		}
		next.ServeHTTP(&writeDeadline{ResponseWriter: w, rc: rc, timeout: writeTimeout}, r)
		// What the handler left buffered is sent after it returns.
		rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	})
}

// readDeadline lifts the read deadline once the body is read, before the
// connection's background read can run into it.
type readDeadline struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *readDeadline) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// writeDeadline gives each write, and each flush, timeout to complete.
type writeDeadline struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (w *writeDeadline) Write(p []byte) (int, error) {
	w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	defer w.rc.SetWriteDeadline(time.Time{})
	return w.ResponseWriter.Write(p)
}

// FlushError is what http.ResponseController.Flush calls, as the SDK does
// after each event.
func (w *writeDeadline) FlushError() error {
	w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	defer w.rc.SetWriteDeadline(time.Time{})
	return w.rc.Flush()
}

func (w *writeDeadline) Flush() { w.FlushError() }

func (w *writeDeadline) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// mcpBounds refuses a new session past maxSessions, and reads a POST's body
// itself so that a body too large or too slow is refused in berm's JSON
// rather than the SDK's plain text.
func (s *Server) mcpBounds(maxSessions int, maxBody int64, next http.Handler) http.Handler {
	var opening atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		// A POST without a session opens one. Those still opening count
		// too, so that a burst cannot pass the check all at once; a session
		// is counted twice while its initialize is answered, which errs on
		// the side of refusing.
		if r.Header.Get("Mcp-Session-Id") == "" {
			n := opening.Add(1)
			defer opening.Add(-1)
			if s.sessions()+int(n) > maxSessions {
				w.Header().Set("Retry-After", strconv.Itoa(int(retryAfter.Seconds())))
				writeError(w, http.StatusServiceUnavailable, "too_many_sessions",
					fmt.Errorf("sessions: %d open, the server's limit; retry later", maxSessions))
				return
			}
		}
		body, ok := readBody(w, r, maxBody, "request body (the arguments limit and 64 KiB)", nil)
		if !ok {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && len(body) > releaseAbove {
			release(next, r, sid)
		}
	})
}

// releaseAbove is the size of a request body past which release follows it.
const releaseAbove = 64 << 10

// release makes a session let go of the request just served. The SDK's
// jsonrpc2 connection (go-sdk v1.8.0, internal/jsonrpc2/conn.go, handleAsync)
// pops its queue of incoming messages with q = q[1:], so the queue's backing
// array keeps the last message, arguments and all, until another comes in: a
// session idle after a 7.5 MiB call held 7.5 MiB for as long as it stayed
// open (40 sessions, 300 MiB). A no-op notification queued behind it takes
// its place; without a RootsListChangedHandler, which berm never sets,
// notifications/roots/list_changed does nothing. Drop this once the SDK
// clears the slot it pops.
func release(next http.Handler, r *http.Request, sid string) {
	const msg = `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, r.URL.String(), strings.NewReader(msg))
	if err != nil {
		return
	}
	req.Host = r.Host
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	// Newer protocol versions check that Mcp-Method matches the body.
	req.Header.Set("Mcp-Method", "notifications/roots/list_changed")
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
		req.Header.Set("Mcp-Protocol-Version", v)
	}
	next.ServeHTTP(discard{http.Header{}}, req)
}

// discard is a ResponseWriter that drops the response.
type discard struct{ h http.Header }

func (d discard) Header() http.Header         { return d.h }
func (d discard) Write(p []byte) (int, error) { return len(p), nil }
func (d discard) WriteHeader(int)             {}

// sessions is the number of MCP sessions the server holds.
func (s *Server) sessions() int {
	n := 0
	for range s.mcp.Sessions() {
		n++
	}
	return n
}

// readBody reads a request's body, up to limit bytes, or answers the client
// itself: the body is too large (wrapping tooLargeErr when it is not nil), or
// did not arrive within the read timeout.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, what string, tooLargeErr error) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	switch {
	case err == nil:
		return body, true
	case errors.As(err, &tooLarge):
		err := fmt.Errorf("%s over the limit of %d bytes", what, tooLarge.Limit)
		if tooLargeErr != nil {
			err = fmt.Errorf("%w: %w", err, tooLargeErr)
		}
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		writeError(w, http.StatusRequestTimeout, "timeout", fmt.Errorf("%s: not received in time", what))
	default:
		writeError(w, http.StatusBadRequest, "invalid", fmt.Errorf("%s: %w", what, err))
	}
	return nil, false
}
