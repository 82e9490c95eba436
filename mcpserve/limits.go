package mcpserve

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
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

// liveSessions are the ids of the sessions the SDK holds.
func (s *Server) liveSessions() map[string]bool {
	live := map[string]bool{}
	for ss := range s.mcp.Sessions() {
		live[ss.ID()] = true
	}
	return live
}

// readBody reads a request's body, up to limit bytes, holding what it holds
// of bodies until release is called; or it answers the client itself: the
// body is too large (wrapping tooLargeErr when it is not nil), the bodies
// held are at their bound, or the body did not arrive within the read
// timeout.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, what string, tooLargeErr error, bodies *budget) ([]byte, func(), bool) {
	tooLarge := func(limit int64) {
		err := fmt.Errorf("%s over the limit of %d bytes", what, limit)
		if tooLargeErr != nil {
			err = fmt.Errorf("%w: %w", err, tooLargeErr)
		}
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", err)
	}
	if r.ContentLength > limit {
		tooLarge(limit) // without reading a byte of it
		return nil, nil, false
	}
	held := &heldBody{r: http.MaxBytesReader(w, r.Body, limit), bodies: bodies, length: r.ContentLength}
	body, err := held.readAll()
	var maxBytes *http.MaxBytesError
	switch {
	case err == nil:
		return body, held.release, true
	case errors.Is(err, errBodiesFull):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "busy", fmt.Errorf(
			"request bodies: %d bytes are held at once, the bound (--max-body-memory): retry shortly", bodies.max))
	case errors.As(err, &maxBytes):
		tooLarge(maxBytes.Limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		writeError(w, http.StatusRequestTimeout, "timeout", fmt.Errorf("%s: not received in time", what))
	default:
		writeError(w, http.StatusBadRequest, "invalid", fmt.Errorf("%s: %w", what, err))
	}
	held.release()
	return nil, nil, false
}

// The request bodies held at once are bounded in bytes (HTTPConfig
// MaxBodyMemory): each was held whole with no bound on how many, and 300
// connections sending a body of 1 MiB, but for its last byte, held 385 MB
// for the minute of --read-timeout, eight uploads of 63 MiB 1.3 GB. A body
// is charged what it has been read into, as it is read, so what it is
// charged is what it holds, not what it announces (a connection that
// announces a body and sends nothing holds one chunk); past the bound it is
// refused, 503 with Retry-After.

// errBodiesFull: the bodies held are at their bound.
var errBodiesFull = errors.New("request bodies held at their bound")

// heldBody reads a body of length bytes (-1: unknown) into a buffer
// charged to bodies.
type heldBody struct {
	r      io.Reader
	bodies *budget
	length int64
	held   int64
}

// A body is read into chunks: the first of firstChunk, the others of
// bodyChunk. A body of at most firstChunk (an initialize, a ping, most
// calls) is never refused by the bound of the bodies held: those are
// bounded by the connections the process holds, and slow uploads could
// otherwise refuse every client its next request.
const (
	firstChunk = 4 << 10
	bodyChunk  = 64 << 10
)

// readAll is io.ReadAll into chunks (the last never past the announced
// length), each charged once its first byte has arrived, then joined: so a
// body that trickles in holds what it is charged, not a buffer doubled and
// the copies it left behind (300 bodies of 1 MiB held twice the bound so),
// and a connection that sends its headers alone holds nothing (2,100 of
// them, announcing 1 MiB each, held the whole bound for --read-timeout).
func (h *heldBody) readAll() ([]byte, error) {
	var chunks [][]byte
	var n int64
	small := h.length >= 0 && h.length <= firstChunk
	src := &lastError{r: h.r}
	for {
		size := int64(bodyChunk)
		if len(chunks) == 0 {
			size = firstChunk
		}
		if h.length >= 0 {
			if size = min(size, h.length-n); size == 0 {
				// All it announced: net/http ends the body there.
				var end [1]byte
				if _, err := io.ReadFull(src, end[:]); err != io.EOF {
					return nil, fmt.Errorf("more than its Content-Length of %d bytes: %v", h.length, err)
				}
				break
			}
		}
		var first [1]byte
		if _, err := io.ReadFull(src, first[:]); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		if small {
			h.bodies.force(size)
		} else if !h.bodies.tryTake(size) {
			return nil, errBodiesFull
		}
		h.held += size
		chunk := make([]byte, size)
		chunk[0] = first[0]
		got, err := io.ReadFull(src, chunk[1:])
		chunks = append(chunks, chunk[:1+got])
		n += int64(1 + got)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	// io.ReadFull says ErrUnexpectedEOF both for a body that ended inside a
	// chunk, as most do, and for one net/http saw cut off (short of its
	// Content-Length, or inside a chunk of chunked encoding): a body cut off
	// is not the request.
	if h.length >= 0 && n < h.length {
		return nil, fmt.Errorf("cut off at %d bytes of its Content-Length of %d: %w", n, h.length, io.ErrUnexpectedEOF)
	}
	if src.err == io.ErrUnexpectedEOF {
		return nil, fmt.Errorf("cut off at %d bytes, inside a chunk: %w", n, io.ErrUnexpectedEOF)
	}
	if len(chunks) == 1 {
		return chunks[0], nil
	}
	return bytes.Join(chunks, nil), nil
}

// lastError is r, keeping the error of its last Read.
type lastError struct {
	r   io.Reader
	err error
}

func (l *lastError) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.err = err
	return n, err
}

func (h *heldBody) release() {
	h.bodies.give(h.held)
	h.held = 0
}
