package httpbound

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The bounds berm puts on a request to a server it does not run (an OCI
// registry, an index's git server) unless told otherwise.
const (
	// DefaultTimeout bounds one request, its body included: enough to
	// move a 64 MiB image at 75 KiB/s.
	DefaultTimeout = 15 * time.Minute
	// DefaultMinRate is the slowest a request may move bytes, in bytes a
	// second, averaged over DefaultWindow: 80 KiB in 20 s, which only a
	// stalled link or a trickling server falls below.
	DefaultMinRate = 4 << 10
	// DefaultWindow is the window the rate is averaged over: long enough
	// for a link's stall of a few seconds (TCP's retransmission, a Wi-Fi
	// handover) to pass.
	DefaultWindow = 20 * time.Second
)

// Defaults are the limits DefaultTimeout, DefaultMinRate over DefaultWindow.
func Defaults() Limits {
	return Limits{Timeout: DefaultTimeout, MinRate: DefaultMinRate, Window: DefaultWindow}
}

// Limits are the bounds of one request; a zero field is no bound.
type Limits struct {
	// Timeout bounds a request from its start to the last byte of its
	// response's body, whatever the transport under it retries.
	Timeout time.Duration
	// MinRate is the fewest bytes a second a request may move, sent and
	// received, averaged over each Window of it; a request with no answer
	// for a Window is below it.
	MinRate int64
	// Window is the window MinRate is averaged over; zero means
	// DefaultWindow.
	Window time.Duration
}

// Transport bounds every request it sends by Limits. It ends a request
// that runs past the timeout, or that moves (sends or receives) fewer than
// MinRate bytes a second over a window, answers included: waiting for an
// answer is a window without bytes. A request ended so fails, in
// RoundTrip or in a read of its body, with an *Error that wraps Err.
type Transport struct {
	// Next sends the requests; nil means http.DefaultTransport.
	Next http.RoundTripper
	Limits
	// Err is what a bound's error wraps, for errors.Is: the caller's
	// sentinel ("registry too slow"); nil, none.
	Err error
}

func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	next := t.Next
	if next == nil {
		next = http.DefaultTransport
	}
	if t.Timeout <= 0 && t.MinRate <= 0 {
		return next.RoundTrip(req)
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &watch{t: t, window: t.Window, host: req.URL.Host, cancel: cancel}
	if w.window <= 0 {
		w.window = DefaultWindow
	}
	w.start()
	out := req.WithContext(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		// An upload counts as it is read; a retry reads a fresh body.
		out.Body = &countedBody{ReadCloser: req.Body, w: w}
		if req.GetBody != nil {
			out.GetBody = func() (io.ReadCloser, error) {
				rc, err := req.GetBody()
				if err != nil {
					return nil, err
				}
				return &countedBody{ReadCloser: rc, w: w}, nil
			}
		}
	}
	resp, err := next.RoundTrip(out)
	if err != nil {
		w.stop()
		cancel(nil)
		return nil, w.failure(err)
	}
	w.answered.Store(true)
	resp.Body = &watchedBody{rc: resp.Body, w: w, cancel: cancel}
	return resp, nil
}

// watch keeps the bounds of one request.
type watch struct {
	t      *Transport
	window time.Duration
	host   string
	cancel context.CancelCauseFunc

	moved    atomic.Int64 // bytes sent and received
	answered atomic.Bool  // the response's headers came

	mu    sync.Mutex
	done  bool
	err   error // why the request was ended
	timer *time.Timer
	tick  *time.Timer
	mark  int64 // moved when the window began
}

func (w *watch) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.t.Timeout > 0 {
		w.timer = time.AfterFunc(w.t.Timeout, func() {
			w.fail(&Error{Host: w.host, Timeout: w.t.Timeout, Err: w.t.Err})
		})
	}
	if w.t.MinRate > 0 {
		w.tick = time.AfterFunc(w.window, w.check)
	}
}

// check ends the request if the window now over moved too few bytes, and
// starts the next window otherwise.
func (w *watch) check() {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return
	}
	n := w.moved.Load()
	need := int64(float64(w.t.MinRate) * w.window.Seconds())
	if n-w.mark >= need {
		w.mark = n
		w.tick.Reset(w.window)
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	w.fail(&Error{Host: w.host, Window: w.window, Moved: n - w.mark, MinRate: w.t.MinRate,
		Silent: n == 0 && !w.answered.Load(), Err: w.t.Err})
}

// fail ends the request for err, unless it is over.
func (w *watch) fail(err error) {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return
	}
	w.err = err
	w.stopLocked()
	w.mu.Unlock()
	w.cancel(err)
}

// stop ends the watch: the request is over.
func (w *watch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopLocked()
}

func (w *watch) stopLocked() {
	w.done = true
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.tick != nil {
		w.tick.Stop()
	}
}

// failure is why the request was ended, in place of err (the cancelled
// context's), or err itself when no bound ended it.
func (w *watch) failure(err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	return err
}

// countedBody counts an upload as the transport reads it.
type countedBody struct {
	io.ReadCloser
	w *watch
}

func (c *countedBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.w.moved.Add(int64(n))
	return n, err
}

// watchedBody counts a response's body as the caller reads it, and ends the
// watch at its end.
type watchedBody struct {
	rc     io.ReadCloser
	w      *watch
	cancel context.CancelCauseFunc
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.w.moved.Add(int64(n))
	switch {
	case err == io.EOF:
		b.w.stop()
	case err != nil:
		err = b.w.failure(err)
	}
	return n, err
}

func (b *watchedBody) Close() error {
	b.w.stop()
	err := b.rc.Close()
	b.cancel(nil)
	return err
}

// Error is a request ended by a bound: it names the host and the bound.
type Error struct {
	// Host is the request's host[:port].
	Host string
	// Timeout is set when the request ran past it; the rest otherwise.
	Timeout time.Duration
	// Window, Moved and MinRate are the window that moved too little,
	// what it moved, and the rate it fell below.
	Window  time.Duration
	Moved   int64
	MinRate int64
	// Silent says nothing came in the window, not even an answer.
	Silent bool
	// Err is Transport.Err.
	Err error
}

func (e *Error) Error() string {
	switch {
	case e.Timeout > 0:
		return fmt.Sprintf("%s: a request ran past the request timeout of %s%s", e.Host, e.Timeout, e.suffix())
	case e.Silent:
		return fmt.Sprintf("%s: no answer in %s (the minimum rate's window)%s", e.Host, e.Window, e.suffix())
	}
	return fmt.Sprintf("%s: %s transferred in %s, below the minimum rate of %s/s%s", e.Host, byteCount(e.Moved), e.Window, byteCount(e.MinRate), e.suffix())
}

func (e *Error) suffix() string {
	if e.Err == nil {
		return ""
	}
	return ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// byteCount prints n for people: "212 bytes", "4 KiB", "1.5 MiB".
func byteCount(n int64) string {
	switch {
	case n >= 1<<20:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<20))) + " MiB"
	case n >= 1<<10:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<10))) + " KiB"
	case n == 1:
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}

func trimZero(s string) string {
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		return s[:len(s)-2]
	}
	return s
}
