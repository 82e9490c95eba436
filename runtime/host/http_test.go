package host_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/host"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// fakeResolver resolves the names it holds, and no other.
type fakeResolver map[string][]netip.Addr

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// deployHTTP deploys testdata/http.wasm as "web" with grants, berm.http
// configured by cfg, and limits.
func deployHTTP(t testing.TB, cfg host.HTTPConfig, limits runtime.Limits, grants sandbox.Grants) *runtime.Runtime {
	t.Helper()
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.Config{
		Syscalls: []runtime.Syscall{host.HTTP(cfg)},
		Limits:   limits,
		HostError: func(_ context.Context, _, _ string, err error) {
			t.Errorf("host error: %v", err)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	image, err := os.ReadFile(filepath.Join("testdata", "http.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Deploy(ctx, "web", image, &grants); err != nil {
		t.Fatal(err)
	}
	return rt
}

// frame encodes fields as ABI.md's Framing says.
func frame(fields ...string) []byte {
	var b []byte
	for _, f := range fields {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(f)))
		b = append(b, f...)
	}
	return b
}

// unframe splits what berm.http staged into its fields.
func unframe(t testing.TB, b []byte) []string {
	t.Helper()
	var out []string
	for len(b) > 0 {
		if len(b) < 4 {
			t.Fatalf("bad frame: %q", b)
		}
		n := binary.LittleEndian.Uint32(b)
		if int(n) > len(b)-4 {
			t.Fatalf("bad frame: %q", b)
		}
		out = append(out, string(b[4:4+n]))
		b = b[4+n:]
	}
	return out
}

// fetch calls the tool with the frame.
func fetch(rt *runtime.Runtime, in []byte) (runtime.Outcome, error) {
	args := fmt.Sprintf(`{"x":"%s"}`, hex.EncodeToString(in))
	return rt.Call(context.Background(), "web", "fetch", []byte(args))
}

// response is what berm.http gave the program.
type response struct {
	kind    string // ok, error, refused
	status  string
	headers string
	body    string
	message string
}

func call(t testing.TB, rt *runtime.Runtime, method, url, headers, body string) response {
	t.Helper()
	out, err := fetch(rt, frame(method, url, headers, body))
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	kind, rest, _ := strings.Cut(string(out.Result), ":")
	r := response{kind: kind}
	if kind != "ok" {
		r.message = rest
		return r
	}
	f := unframe(t, []byte(rest))
	if len(f) != 3 {
		t.Fatalf("the response has %d fields, want 3: %q", len(f), f)
	}
	r.status, r.headers, r.body = f[0], f[1], f[2]
	return r
}

// quiet discards a test server's log of the handshakes it refuses.
var quiet = log.New(io.Discard, "", 0)

// grantOf is the grant of a test server's address.
func grantOf(s *httptest.Server) string { return s.Listener.Addr().String() }

func portOf(s *httptest.Server) string {
	_, p, _ := net.SplitHostPort(grantOf(s))
	return p
}

// echo answers with what it received.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("X-Method", r.Method)
	w.Header().Set("X-Got", r.Header.Get("X-Test"))
	w.Header().Add("X-Multi", "a")
	w.Header().Add("X-Multi", "b")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, b)
})

func TestHTTP(t *testing.T) {
	srv := httptest.NewServer(echo)
	defer srv.Close()
	other := httptest.NewServer(echo)
	defer other.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("/to-other", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/landed", http.StatusFound)
	})
	mux.HandleFunc("/to-self", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/landed", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Write(bytes.Repeat([]byte("x"), 4096))
	})
	mux.HandleFunc("/exact", func(w http.ResponseWriter, r *http.Request) {
		w.Write(bytes.Repeat([]byte("x"), 1024))
	})
	mux.HandleFunc("/bigheader", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("h", host.DefaultMaxHeaders))
	})
	mux.HandleFunc("/missing", http.NotFound)
	mux.Handle("/", echo)
	redir := httptest.NewServer(mux)
	defer redir.Close()

	closed := httptest.NewServer(echo)
	closedURL, closedGrant := closed.URL, grantOf(closed)
	closed.Close()

	resolver := fakeResolver{
		"svc.test":     {netip.MustParseAddr("127.0.0.1")},
		"mapped.test":  {netip.MustParseAddr("::ffff:127.0.0.1")},
		"mixed.test":   {netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("127.0.0.1")},
		"private.test": {netip.MustParseAddr("10.255.0.1")},
	}
	cfg := host.HTTPConfig{Resolver: resolver, MaxResponse: 1024, MaxRequest: 1024}
	port := portOf(srv)

	for _, tc := range []struct {
		name    string
		grants  []string
		method  string
		url     string
		headers string
		body    string
		want    response
		// message holds these, in order, when the request is refused.
		message []string
	}{
		{name: "granted by address", grants: []string{grantOf(srv)}, method: "POST", url: srv.URL + "/p",
			headers: "X-Test: yes\r\nContent-Type: text/plain\n", body: "hello",
			want: response{kind: "ok", status: "201", body: "POST /p hello"}},
		{name: "status of an error is a response", grants: []string{grantOf(redir)}, method: "GET", url: redir.URL + "/missing",
			want: response{kind: "ok", status: "404", body: "404 page not found\n"}},
		{name: "host not granted", grants: nil, method: "GET", url: srv.URL,
			want: response{kind: "refused"}, message: []string{"berm.http: GET 127.0.0.1:" + port + ": the host is not granted", "--allow-host 127.0.0.1:" + port + ")"}},
		{name: "granted on another port", grants: []string{grantOf(other)}, method: "GET", url: srv.URL,
			want: response{kind: "refused"}, message: []string{"127.0.0.1:" + port + ": the host is not granted"}},
		{name: "redirect to a granted host", grants: []string{grantOf(redir), grantOf(other)}, method: "GET", url: redir.URL + "/to-other",
			want: response{kind: "ok", status: "201", body: "GET /landed "}},
		{name: "redirect on the same host", grants: []string{grantOf(redir)}, method: "GET", url: redir.URL + "/to-self",
			want: response{kind: "ok", status: "201", body: "GET /landed "}},
		{name: "redirect to a host not granted", grants: []string{grantOf(redir)}, method: "GET", url: redir.URL + "/to-other",
			want: response{kind: "refused"}, message: []string{grantOf(other) + ": redirected here from " + grantOf(redir) + ", and this host is not granted"}},
		{name: "redirect loop", grants: []string{grantOf(redir)}, method: "GET", url: redir.URL + "/loop",
			want: response{kind: "refused"}, message: []string{"more than 10 redirects"}},
		{name: "name resolving to loopback", grants: []string{"svc.test:" + port}, method: "GET", url: "http://svc.test:" + port + "/",
			want: response{kind: "refused"}, message: []string{"svc.test:" + port + ": it resolves to the internal address 127.0.0.1, which is not granted", "--allow-host 127.0.0.1:" + port}},
		{name: "name resolving to a mapped loopback", grants: []string{"mapped.test:" + port}, method: "GET", url: "http://mapped.test:" + port + "/",
			want: response{kind: "refused"}, message: []string{"internal address 127.0.0.1,"}},
		{name: "default port", grants: nil, method: "GET", url: "https://example.com/",
			want: response{kind: "refused"}, message: []string{"GET example.com:443: the host is not granted (a deployment grants it with --allow-host example.com)"}},
		{name: "name resolving to private", grants: []string{"private.test:" + port}, method: "GET", url: "http://private.test:" + port + "/",
			want: response{kind: "refused"}, message: []string{"internal address 10.255.0.1"}},
		{name: "name and address granted", grants: []string{"svc.test:" + port, grantOf(srv)}, method: "GET", url: "http://svc.test:" + port + "/n",
			want: response{kind: "ok", status: "201", body: "GET /n "}},
		{name: "internal address skipped for a granted one", grants: []string{"mixed.test:" + port, grantOf(srv)}, method: "GET", url: "http://mixed.test:" + port + "/m",
			want: response{kind: "ok", status: "201", body: "GET /m "}},
		{name: "DNS failure", grants: []string{"nowhere.test:" + port}, method: "GET", url: "http://nowhere.test:" + port + "/",
			want: response{kind: "refused"}, message: []string{"nowhere.test:" + port + ": DNS: no such host"}},
		{name: "connection refused", grants: []string{closedGrant}, method: "GET", url: closedURL,
			want: response{kind: "refused"}, message: []string{"connection refused"}},
		{name: "response over the limit", grants: []string{grantOf(redir)}, method: "GET", url: redir.URL + "/big",
			want: response{kind: "refused"}, message: []string{"the response's body is over the limit of 1024 bytes"}},
		{name: "response at the limit", grants: []string{grantOf(redir)}, method: "GET", url: redir.URL + "/exact",
			want: response{kind: "ok", status: "200", body: strings.Repeat("x", 1024)}},
		{name: "response headers over the limit", grants: []string{grantOf(redir)}, method: "GET", url: redir.URL + "/bigheader",
			want: response{kind: "refused"}, message: []string{"the response's headers are over the limit of 65536 bytes"}},
		{name: "request over the limit", grants: []string{grantOf(srv)}, method: "POST", url: srv.URL, body: strings.Repeat("y", 1025),
			want: response{kind: "refused"}, message: []string{"the request's body of 1025 bytes is over the limit of 1024 bytes"}},
		{name: "scheme", grants: []string{grantOf(srv)}, method: "GET", url: "ftp://" + grantOf(srv) + "/",
			want: response{kind: "refused"}, message: []string{"the scheme must be http or https"}},
		{name: "file URL", grants: []string{grantOf(srv)}, method: "GET", url: "file:///etc/passwd",
			want: response{kind: "refused"}, message: []string{"the scheme must be http or https"}},
		{name: "no host", grants: []string{grantOf(srv)}, method: "GET", url: "http:///x",
			want: response{kind: "refused"}, message: []string{"no host"}},
		{name: "bad URL", grants: []string{grantOf(srv)}, method: "GET", url: "http://[::1",
			want: response{kind: "refused"}, message: []string{"bad URL"}},
		{name: "bad method", grants: []string{grantOf(srv)}, method: "GE T", url: srv.URL,
			want: response{kind: "refused"}, message: []string{`berm.http: bad method "GE T"`}},
		{name: "bad header", grants: []string{grantOf(srv)}, method: "GET", url: srv.URL, headers: "no colon here",
			want: response{kind: "refused"}, message: []string{"bad header line"}},
		{name: "header with CR", grants: []string{grantOf(srv)}, method: "GET", url: srv.URL, headers: "X-A: b\rX-C: d",
			want: response{kind: "refused"}, message: []string{"bad header X-A"}},
		{name: "Host header", grants: []string{grantOf(srv)}, method: "GET", url: srv.URL, headers: "Host: other.example",
			want: response{kind: "refused"}, message: []string{"bad header Host"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logged bytes.Buffer
			c := cfg
			c.Logger = slog.New(slog.NewTextHandler(&logged, nil))
			rt := deployHTTP(t, c, runtime.Limits{}, sandbox.Grants{Hosts: tc.grants})
			got := call(t, rt, tc.method, tc.url, tc.headers, tc.body)
			if got.kind != tc.want.kind {
				t.Fatalf("%s, want %s: %+v", got.kind, tc.want.kind, got)
			}
			if got.kind == "ok" {
				if got.status != tc.want.status || got.body != tc.want.body {
					t.Errorf("status %s, body %q; want %s, %q", got.status, got.body, tc.want.status, tc.want.body)
				}
			}
			at := 0
			for _, m := range tc.message {
				i := strings.Index(got.message[at:], m)
				if i < 0 {
					t.Errorf("message %q lacks %q (after offset %d)", got.message, m, at)
					break
				}
				at += i + len(m)
			}
			if strings.Contains(got.message, os.TempDir()) {
				t.Errorf("message names a host path: %q", got.message)
			}
			if !strings.Contains(logged.String(), "level=INFO msg=berm.http program=web tool=fetch method=") {
				t.Errorf("not logged: %s", logged.String())
			}
			if got.kind == "refused" && !strings.Contains(logged.String(), "refused=") {
				t.Errorf("the refusal is not logged: %s", logged.String())
			}
		})
	}
}

// TestHTTPHeaders: the request's headers reach the server, and the
// response's come back as a header block.
func TestHTTPHeaders(t *testing.T) {
	srv := httptest.NewServer(echo)
	defer srv.Close()
	rt := deployHTTP(t, host.HTTPConfig{}, runtime.Limits{}, sandbox.Grants{Hosts: []string{grantOf(srv)}})
	got := call(t, rt, "PUT", srv.URL+"/h", "x-test: lower\n\n", "b")
	for _, want := range []string{"X-Got: lower\r\n", "X-Method: PUT\r\n", "X-Multi: a\r\nX-Multi: b\r\n", "Content-Length: 8\r\n"} {
		if !strings.Contains(got.headers, want) {
			t.Errorf("headers %q lack %q", got.headers, want)
		}
	}
	if got.status != "201" || got.body != "PUT /h b" {
		t.Errorf("status %s, body %q", got.status, got.body)
	}
}

func TestHTTPS(t *testing.T) {
	srv := httptest.NewUnstartedServer(echo)
	srv.Config.ErrorLog = quiet
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	port := portOf(srv)
	// httptest's certificate is for example.com and 127.0.0.1.
	resolver := fakeResolver{"example.com": {netip.MustParseAddr("127.0.0.1")}, "wrong.test": {netip.MustParseAddr("127.0.0.1")}}
	grants := sandbox.Grants{Hosts: []string{grantOf(srv), "example.com:" + port, "wrong.test:" + port}}
	for _, tc := range []struct {
		name, url string
		roots     *x509.CertPool
		kind      string
		message   string
	}{
		{"by address", srv.URL + "/a", roots, "ok", ""},
		{"by name, SNI and verification on it", "https://example.com:" + port + "/n", roots, "ok", ""},
		{"name not on the certificate", "https://wrong.test:" + port + "/", roots, "refused", "wrong.test:" + port + ": TLS: the server's certificate does not verify"},
		{"unknown authority", srv.URL, nil, "refused", "TLS: the server's certificate does not verify"},
		{"plain HTTP to a TLS port", "http://" + grantOf(srv) + "/", roots, "ok", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := deployHTTP(t, host.HTTPConfig{Resolver: resolver, RootCAs: tc.roots}, runtime.Limits{}, grants)
			got := call(t, rt, "GET", tc.url, "", "")
			if got.kind != tc.kind || !strings.Contains(got.message, tc.message) {
				t.Errorf("%+v, want %s with %q", got, tc.kind, tc.message)
			}
		})
	}
}

// TestHTTPNeverAnswers: a server that never answers meets the timeout, or
// the call's deadline when that comes first.
func TestHTTPNeverAnswers(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	grants := sandbox.Grants{Hosts: []string{grantOf(srv)}}

	t.Run("timeout", func(t *testing.T) {
		rt := deployHTTP(t, host.HTTPConfig{Timeout: 200 * time.Millisecond}, runtime.Limits{}, grants)
		start := time.Now()
		got := call(t, rt, "GET", srv.URL, "", "")
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("took %v, want about 200ms", d)
		}
		if got.kind != "refused" || !strings.Contains(got.message, "no complete response within 200ms") {
			t.Errorf("%+v, want a refusal for the timeout", got)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		rt := deployHTTP(t, host.HTTPConfig{}, runtime.Limits{Deadline: 300 * time.Millisecond}, grants)
		start := time.Now()
		_, err := fetch(rt, frame("GET", srv.URL, "", ""))
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("took %v, want about 300ms", d)
		}
		if !errors.Is(err, runtime.ErrDeadline) {
			t.Errorf("err = %v, want ErrDeadline", err)
		}
	})
}

// TestHTTPFrame: a frame of other than four fields traps, as ABI.md says.
func TestHTTPFrame(t *testing.T) {
	rt := deployHTTP(t, host.HTTPConfig{}, runtime.Limits{}, sandbox.Grants{})
	if _, err := fetch(rt, frame("GET", "http://x/", "")); !errors.Is(err, runtime.ErrTrap) {
		t.Errorf("three fields: %v, want ErrTrap", err)
	}
}

// TestHTTPGrantsPerProgram: a connection made under one program's grants
// serves no other program, even for the same name.
func TestHTTPGrantsPerProgram(t *testing.T) {
	srv := httptest.NewServer(echo)
	defer srv.Close()
	port := portOf(srv)
	resolver := fakeResolver{"svc.test": {netip.MustParseAddr("127.0.0.1")}}
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.Config{Syscalls: []runtime.Syscall{host.HTTP(host.HTTPConfig{Resolver: resolver})}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	image, err := os.ReadFile(filepath.Join("testdata", "http.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	for name, hosts := range map[string][]string{
		"web":   {"svc.test:" + port, grantOf(srv)},
		"other": {"svc.test:" + port},
	} {
		if _, err := rt.Deploy(ctx, name, image, &sandbox.Grants{Hosts: hosts}); err != nil {
			t.Fatal(err)
		}
	}
	in := hex.EncodeToString(frame("GET", "http://svc.test:"+port+"/", "", ""))
	for _, step := range []struct{ program, want string }{{"web", "ok:"}, {"other", "refused:"}, {"web", "ok:"}} {
		out, err := rt.Call(ctx, step.program, "fetch", []byte(`{"x":"`+in+`"}`))
		if err != nil || !strings.HasPrefix(string(out.Result), step.want) {
			t.Errorf("%s: %q, %v; want %s", step.program, out.Result, err, step.want)
		}
	}
}

// TestHTTPQuotesAPrefix: a refusal, and the log's record of it, quote at
// most a prefix of the program's method, URL or header line, however long
// (a method of 200 KiB was quoted whole, and a valid one sent on).
func TestHTTPQuotesAPrefix(t *testing.T) {
	bad := "http://[::1" + strings.Repeat("x", host.MaxURL-len("http://[::1"))
	for _, tc := range []struct {
		name, method, url, headers string
		message                    string
	}{
		{"method", strings.Repeat("A ", 100<<10), "http://x/", "", `berm.http: bad method "A A A `},
		{"method token", strings.Repeat("A", 200<<10), "http://x/", "", `berm.http: bad method "AAAA`},
		{"URL", "GET", bad, "", `berm.http: bad URL "http://[::1xxx`},
		{"header line", "GET", "http://x/", strings.Repeat("h", 60<<10), `bad header line "hhhh`},
		{"header name", "GET", "http://x/", strings.Repeat("X", 60<<10) + ": a\rb", "bad header XXXX"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logged bytes.Buffer
			cfg := host.HTTPConfig{Logger: slog.New(slog.NewTextHandler(&logged, nil))}
			rt := deployHTTP(t, cfg, runtime.Limits{}, sandbox.Grants{Hosts: []string{"x"}})
			got := call(t, rt, tc.method, tc.url, tc.headers, "")
			if got.kind != "refused" || !strings.Contains(got.message, tc.message) {
				t.Fatalf("%s %.100q, want refused %q", got.kind, got.message, tc.message)
			}
			if len(got.message) > 512 {
				t.Errorf("the refusal is %d bytes, want at most 512: %.100q…", len(got.message), got.message)
			}
			if logged.Len() > 1024 {
				t.Errorf("the log's record is %d bytes, want at most 1024: %.100q…", logged.Len(), logged.String())
			}
		})
	}
}
