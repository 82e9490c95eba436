package httpbound_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berm-dev/berm/internal/httpbound"
)

var errSlow = errors.New("server too slow")

// server answers at /silent never, at /trickle 64 bytes, one every 20 ms
// (50 bytes a second), at /sound 64 KiB, 4 KiB every 20 ms (200 KiB a
// second), and at /upload reads the request's body a byte every 20 ms.
func server(t *testing.T) *httptest.Server {
	t.Helper()
	stop := make(chan struct{})
	tick := func(ctx context.Context) bool {
		select {
		case <-ctx.Done():
			return false
		case <-stop:
			return false
		case <-time.After(20 * time.Millisecond):
			return true
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		chunk, size := 0, 0
		switch r.URL.Path {
		case "/silent":
			select {
			case <-ctx.Done():
			case <-stop:
			}
			return
		case "/upload":
			b := make([]byte, 1)
			for tick(ctx) {
				if _, err := r.Body.Read(b); err != nil {
					break
				}
			}
			return
		case "/trickle":
			chunk, size = 1, 64
		case "/sound":
			chunk, size = 4<<10, 64<<10
		}
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.WriteHeader(http.StatusOK)
		for sent := 0; sent < size && tick(ctx); sent += chunk {
			if _, err := w.Write(bytes.Repeat([]byte("x"), chunk)); err != nil {
				return
			}
			http.NewResponseController(w).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // before Close, which waits for the handlers
	return srv
}

// get sends a request to url through t and reads its body whole.
func get(ctx context.Context, tr *httpbound.Transport, method, url string, body io.Reader) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// within runs f and fails the test if it has not returned after a minute:
// without the bounds, a silent server holds a request for ever.
func within(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("still waiting after a minute")
		return nil
	}
}

// slowUpload is a body more than loopback's socket buffers take at once.
type slowUpload struct{ n int }

func (u *slowUpload) Read(p []byte) (int, error) {
	if u.n <= 0 {
		return 0, io.EOF
	}
	n := min(len(p), u.n)
	u.n -= n
	return n, nil
}

// TestTransport: a request that gets no answer, a body a byte at a time,
// or an upload read a byte at a time for a window, or that runs past the
// timeout, fails with an *Error that names the host and the bound and
// wraps Err; a slow link that keeps the rate is not cut, whatever its
// windows.
func TestTransport(t *testing.T) {
	t.Parallel()
	srv := server(t)
	host := strings.TrimPrefix(srv.URL, "http://")
	// A window short enough for a quick test: 256 bytes in each.
	rate := httpbound.Limits{MinRate: 1 << 10, Window: 250 * time.Millisecond}
	for _, tc := range []struct {
		name, path string
		lim        httpbound.Limits
		upload     bool
		want       string
	}{
		{"no answer", "/silent", rate, false, "no answer in 250ms (the minimum rate's window)"},
		{"a byte at a time", "/trickle", rate, false, "transferred in 250ms, below the minimum rate of 1 KiB/s"},
		{"upload read a byte at a time", "/upload", httpbound.Limits{MinRate: 64 << 10, Window: 250 * time.Millisecond}, true,
			"transferred in 250ms, below the minimum rate of 64 KiB/s"},
		// 200 KiB/s, and 320 ms for the body.
		{"past the timeout", "/sound", httpbound.Limits{Timeout: 100 * time.Millisecond}, false,
			"a request ran past the request timeout of 100ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := &httpbound.Transport{Limits: tc.lim, Err: errSlow}
			err := within(t, func() error {
				var body io.Reader
				method := http.MethodGet
				if tc.upload {
					method, body = http.MethodPut, &slowUpload{n: 16 << 20}
				}
				_, err := get(t.Context(), tr, method, srv.URL+tc.path, body)
				return err
			})
			var bound *httpbound.Error
			if !errors.Is(err, errSlow) || !errors.As(err, &bound) || bound.Host != host {
				t.Fatalf("error %v, want an *Error for %s wrapping errSlow", err, host)
			}
			if want := host + ": "; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.want+": server too slow") {
				t.Errorf("error %q does not say %q and %q", err, want, tc.want)
			}
		})
	}

	t.Run("sound", func(t *testing.T) {
		t.Parallel()
		// 200 KiB/s against 1 KiB/s: a body of a window and more.
		b, err := get(t.Context(), &httpbound.Transport{Limits: rate, Err: errSlow}, http.MethodGet, srv.URL+"/sound", nil)
		if err != nil || len(b) != 64<<10 {
			t.Fatalf("%d bytes, %v", len(b), err)
		}
	})

	t.Run("no limits", func(t *testing.T) {
		t.Parallel()
		// The zero Limits bound nothing: a trickle of a second and more ends.
		b, err := get(t.Context(), &httpbound.Transport{Err: errSlow}, http.MethodGet, srv.URL+"/trickle", nil)
		if err != nil || len(b) != 64 {
			t.Fatalf("%d bytes, %v", len(b), err)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		// The caller's own end is its, not a bound's.
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_, err := get(ctx, &httpbound.Transport{Limits: httpbound.Defaults(), Err: errSlow}, http.MethodGet, srv.URL+"/silent", nil)
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errSlow) {
			t.Fatalf("error %v, want the context's", err)
		}
	})
}

// An *Error with no Err says its bound alone.
func TestErrorText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  *httpbound.Error
		want string
	}{
		{&httpbound.Error{Host: "h:1", Timeout: time.Minute}, "h:1: a request ran past the request timeout of 1m0s"},
		{&httpbound.Error{Host: "h", Window: time.Second, Silent: true, Err: errSlow}, "h: no answer in 1s (the minimum rate's window): server too slow"},
		{&httpbound.Error{Host: "h", Window: time.Second, Moved: 1, MinRate: 4 << 10}, "h: 1 byte transferred in 1s, below the minimum rate of 4 KiB/s"},
		{&httpbound.Error{Host: "h", Window: time.Second, Moved: 3 << 19, MinRate: 1536}, "h: 1.5 MiB transferred in 1s, below the minimum rate of 1.5 KiB/s"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}
