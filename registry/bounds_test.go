package registry

import (
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"
)

// slowReader hands out chunk bytes at a time, every so often: a registry
// that trickles, or a link that is slow but sound.
type slowReader struct {
	r     io.ReadCloser
	chunk int
	every time.Duration
	stop  <-chan struct{} // closed when the test ends
}

func (s *slowReader) Read(p []byte) (int, error) {
	select {
	case <-s.stop:
		// An upload the client gave up on may sit in the socket's
		// buffers: no need to read it a byte at a time.
		return 0, io.ErrUnexpectedEOF
	case <-time.After(s.every):
	}
	return s.r.Read(p[:min(len(p), s.chunk)])
}

func (s *slowReader) Close() error { return s.r.Close() }

// slowness says which requests a slow proxy slows, and how.
type slowness struct {
	// path is in the URL of the requests slowed: "/manifests/", "/blobs/".
	path string
	// upload slows the reading of request bodies instead of the sending of
	// responses.
	upload bool
	chunk  int
	every  time.Duration
}

// startSlowProxy serves registry through a proxy that slows what s says,
// flushing every write, and returns its host:port.
func startSlowProxy(t *testing.T, registry string, s slowness) string {
	t.Helper()
	stop := make(chan struct{})
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: registry})
	rp.FlushInterval = -1
	director := rp.Director
	rp.Director = func(r *http.Request) {
		director(r)
		if s.upload && r.Body != nil && strings.Contains(r.URL.Path, s.path) {
			r.Body = &slowReader{r: r.Body, chunk: s.chunk, every: s.every, stop: stop}
		}
	}
	rp.ModifyResponse = func(resp *http.Response) error {
		if !s.upload && resp.Request.Method == http.MethodGet && strings.Contains(resp.Request.URL.Path, s.path) {
			resp.Body = &slowReader{r: resp.Body, chunk: s.chunk, every: s.every, stop: stop}
		}
		return nil
	}
	rp.ErrorLog = log.New(io.Discard, "", 0) // the requests the bounds cut
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // before Close, which waits for the requests
	return strings.TrimPrefix(srv.URL, "http://")
}

// within runs f and fails the test if it has not returned after a minute:
// before the bounds, a trickling registry held a pull for hours.
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s still waiting after a minute", what)
		return nil
	}
}

// A registry that sends its manifest or its layer a byte at a time, that
// answers nothing, that reads an upload a byte at a time, or that keeps a
// rate but runs past the request timeout is cut off by a bound, and the
// error names the host and the bound.
func TestBounds(t *testing.T) {
	host := startRegistry(t, registryOptions{})
	image := padded(readEcho(t), 256<<10, 11)
	seed := newClient(t, nil)
	if _, err := seed.Push(t.Context(), host+"/berm/echo:v1", image, nil); err != nil {
		t.Fatal(err)
	}
	trickle := 20 * time.Millisecond // 50 bytes a second
	// A window short enough for a quick test: 512 bytes in each.
	rate := &Config{MinRate: 1 << 10, MinRateWindow: 500 * time.Millisecond}
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // accepts, and never answers
	}))
	t.Cleanup(silent.Close)

	for _, tc := range []struct {
		name  string
		host  string // the registry as the client reaches it
		cfg   *Config
		push  bool
		words []string
	}{
		{name: "manifest a byte at a time",
			host:  startSlowProxy(t, host, slowness{path: "/manifests/", chunk: 1, every: trickle}),
			cfg:   rate,
			words: []string{"/berm/echo:v1: manifest: ", "transferred in 500ms, below the minimum rate of 1 KiB/s"}},
		{name: "layer a byte at a time",
			host:  startSlowProxy(t, host, slowness{path: "/blobs/", chunk: 1, every: trickle}),
			cfg:   rate,
			words: []string{"/berm/echo:v1: layer: ", "transferred in 500ms, below the minimum rate of 1 KiB/s"}},
		{name: "no answer",
			host:  strings.TrimPrefix(silent.URL, "http://"),
			cfg:   rate,
			words: []string{"no answer in 500ms"}},
		{name: "past the request timeout",
			host: startSlowProxy(t, host, slowness{path: "/blobs/", chunk: 1 << 10, every: trickle}),
			cfg:  &Config{RequestTimeout: time.Second, MinRate: -1},
			// 50 KiB/s, and 5 s for the layer
			words: []string{"/berm/echo:v1: layer: ", "a request ran past the request timeout of 1s"}},
		{name: "upload read a byte at a time",
			host:  startSlowProxy(t, host, slowness{path: "/blobs/uploads/", upload: true, chunk: 1, every: trickle}),
			cfg:   &Config{MinRate: 64 << 10, MinRateWindow: 500 * time.Millisecond},
			push:  true,
			words: []string{"below the minimum rate of 64 KiB/s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, tc.cfg)
			ref := tc.host + "/berm/echo:v1"
			err := within(t, tc.name, func() error {
				if tc.push {
					// More than loopback's socket buffers take at once.
					_, err := c.Push(t.Context(), tc.host+"/berm/upload:v1", padded(image, 16<<20, 12), nil)
					return err
				}
				_, err := c.Pull(t.Context(), ref, nil)
				return err
			})
			if !errors.Is(err, ErrSlow) {
				t.Fatalf("error %v, want ErrSlow", err)
			}
			t.Log(err)
			for _, w := range append(tc.words, tc.host+": ") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}

	// A slow link that keeps the rate, 200 KiB/s against 1 KiB/s, is not
	// cut, however many windows the layer takes.
	sound := startSlowProxy(t, host, slowness{path: "/blobs/", chunk: 4 << 10, every: trickle})
	got, err := newClient(t, rate).Pull(t.Context(), sound+"/berm/echo:v1", nil)
	if err != nil || len(got.Bytes) != len(image) {
		t.Fatalf("Pull over a slow, sound link: %v", err)
	}
}

// A registry no one answers at is ErrUnreachable, for a pull, an inspect
// and a push alike, and the error names the address.
func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := l.Addr().String()
	l.Close() // nothing listens there now
	c := newClient(t, nil)
	ref := host + "/berm/echo:v1"
	for op, f := range map[string]func() error{
		"Pull":    func() error { _, err := c.Pull(t.Context(), ref, nil); return err },
		"Inspect": func() error { _, err := c.Inspect(t.Context(), ref); return err },
		"Push":    func() error { _, err := c.Push(t.Context(), ref, readEcho(t), nil); return err },
	} {
		err := f()
		if !errors.Is(err, ErrUnreachable) || !strings.HasPrefix(err.Error(), ref+": registry unreachable: ") ||
			!strings.Contains(err.Error(), host) {
			t.Errorf("%s: %v, want ErrUnreachable naming %s", op, err, host)
		}
	}
}
