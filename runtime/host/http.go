package host

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// SysHTTP is the network syscall (ABI.md, berm.http).
const SysHTTP = sandbox.SysHTTP

// Defaults of HTTPConfig's bounds.
const (
	// DefaultHTTPTimeout bounds one request, redirects and the body
	// included; the call's own deadline bounds it too.
	DefaultHTTPTimeout = 30 * time.Second
	// DefaultMaxRequest bounds a request's body: what a program sends.
	DefaultMaxRequest = 1 << 20
	// DefaultMaxResponse bounds a response's body, decompressed: what the
	// host holds staged for the program and the program then copies into
	// its memory, well inside both the 128 MiB of an instance and the
	// 16 MiB of a result.
	DefaultMaxResponse = 4 << 20
	// DefaultMaxHeaders bounds the header block of a request and of a
	// response, each.
	DefaultMaxHeaders = 64 << 10
	// MaxURL bounds a request's URL.
	MaxURL = 8 << 10
	// MaxRedirects is how many redirects berm.http follows; the next one is
	// refused.
	MaxRedirects = 10
)

// Resolver looks up a host's addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// HTTPConfig configures berm.http. The zero value has the defaults: the
// system's resolver and roots, and the Default bounds above.
type HTTPConfig struct {
	// Resolver resolves names; nil is net.DefaultResolver. berm.http dials
	// the addresses it returned and checked, never the name again.
	Resolver Resolver
	// RootCAs verify HTTPS servers; nil is the system's roots.
	RootCAs *x509.CertPool
	// Timeout bounds each request; 0 is DefaultHTTPTimeout.
	Timeout time.Duration
	// MaxRequest, MaxResponse and MaxHeaders bound a request's body, a
	// response's body and either's header block, in bytes; 0 is the default.
	MaxRequest  int
	MaxResponse int
	MaxHeaders  int
	// Logger gets one Info record per request, refused or not; nil logs
	// nothing.
	Logger *slog.Logger
}

func (cfg HTTPConfig) withDefaults() HTTPConfig {
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultHTTPTimeout
	}
	if cfg.MaxRequest <= 0 {
		cfg.MaxRequest = DefaultMaxRequest
	}
	if cfg.MaxResponse <= 0 {
		cfg.MaxResponse = DefaultMaxResponse
	}
	if cfg.MaxHeaders <= 0 {
		cfg.MaxHeaders = DefaultMaxHeaders
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// HTTP returns berm.http: input framed [method, url, headers, body], the
// headers an HTTP/1 header block ("Name: value" lines); staged output framed
// [status, headers, body] for a response of any status. Everything else (a
// host or address not granted, a bound passed, the timeout, a failure of
// DNS, TCP or TLS, a bad request) is staged as the host's refusal, whose
// message names the host: the program decides what to do.
//
// A request reaches only the hosts the program's grants name. berm.http
// resolves the name itself, refuses an address that sandbox.Internal
// reports unless the address itself is granted, and dials the address it
// checked; every connection is checked so, redirects included. No proxy is
// used.
func HTTP(cfg HTTPConfig) runtime.Syscall {
	h := &httpHost{cfg: cfg.withDefaults(), clients: map[string]*grantedClient{}}
	return runtime.Syscall{Name: SysHTTP, Input: runtime.Framed(4), Func: h.call}
}

type httpHost struct {
	cfg     HTTPConfig
	mu      sync.Mutex
	clients map[string]*grantedClient // by program
}

// grantedClient is one program's client. Its connections were checked
// against its grants, so it is shared by that program's calls only, and
// only while its grants are the same: a connection to an internal address
// granted to one program must not serve another that reaches the same name.
type grantedClient struct {
	grants    sandbox.Grants
	transport *http.Transport
	client    *http.Client
	resolver  Resolver
	dialer    net.Dialer
}

// client returns the client of program under grants g.
func (h *httpHost) client(program string, g *sandbox.Grants) *grantedClient {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gc := h.clients[program]; gc != nil {
		if slices.Equal(gc.grants.Hosts, g.Hosts) {
			return gc
		}
		gc.transport.CloseIdleConnections()
	}
	gc := &grantedClient{grants: sandbox.Grants{Hosts: slices.Clone(g.Hosts)}, resolver: h.cfg.Resolver}
	gc.transport = &http.Transport{
		Proxy:                  nil, // never from the environment
		DialContext:            gc.dial,
		TLSClientConfig:        &tls.Config{RootCAs: h.cfg.RootCAs, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      true,
		MaxResponseHeaderBytes: int64(h.cfg.MaxHeaders),
		MaxIdleConnsPerHost:    8,
		IdleConnTimeout:        30 * time.Second,
	}
	gc.client = &http.Client{Transport: gc.transport, CheckRedirect: gc.checkRedirect}
	h.clients[program] = gc
	return gc
}

// refusal is why berm.http refuses a request to host.
type refusal struct {
	host   string
	reason string
}

func (r *refusal) Error() string {
	if r.host == "" {
		return r.reason
	}
	return r.host + ": " + r.reason
}

func notGranted(host string, port int) *refusal {
	grant := hostPort(host, port)
	if port == 80 || port == 443 {
		grant = strings.TrimSuffix(grant, ":"+strconv.Itoa(port))
	}
	return &refusal{hostPort(host, port), "the host is not granted (a deployment grants it with --allow-host " + grant + ")"}
}

func hostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

// dial connects to addr, "host:port", through an address it checked.
func (gc *grantedClient) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, &refusal{addr, "bad address"}
	}
	port, _ := strconv.Atoi(p)
	if !gc.grants.AllowsHost(host, port) {
		return nil, notGranted(host, port)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else if addrs, err = gc.resolver.LookupNetIP(ctx, "ip", host); err != nil {
		return nil, err
	}
	var refused []string
	var dialErr error
	for _, a := range addrs {
		a = a.Unmap()
		if sandbox.Internal(a) && !gc.grants.AllowsAddr(a, port) {
			refused = append(refused, a.String())
			continue
		}
		conn, err := gc.dialer.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		dialErr = err
	}
	switch {
	case dialErr != nil:
		return nil, dialErr
	case len(refused) > 0:
		return nil, &refusal{addr, fmt.Sprintf("it resolves to the internal address %s, which is not granted (grant the address itself, as --allow-host %s, to reach it)",
			strings.Join(refused, ", "), hostPort(refused[0], port))}
	}
	return nil, &refusal{addr, "the name has no addresses"}
}

func (gc *grantedClient) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return &refusal{via[0].URL.Host, fmt.Sprintf("more than %d redirects", MaxRedirects)}
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return &refusal{req.URL.Host, fmt.Sprintf("redirected to a %s URL: only http and https are followed", req.URL.Scheme)}
	}
	port := urlPort(req.URL)
	if !gc.grants.AllowsHost(req.URL.Hostname(), port) {
		r := notGranted(req.URL.Hostname(), port)
		r.reason = "redirected here from " + via[len(via)-1].URL.Host + ", and this" + strings.TrimPrefix(r.reason, "the")
		return r
	}
	return nil
}

func urlPort(u *url.URL) int {
	if p := u.Port(); p != "" {
		n, _ := strconv.Atoi(p)
		return n
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

// exchange is one request as the log sees it.
type exchange struct {
	method, host string
	status       int
	out, in      int
	refused      string
}

func (h *httpHost) call(ctx context.Context, c *runtime.Call, in [][]byte) (uint64, error) {
	start := time.Now()
	ex := exchange{out: len(in[3])}
	out, err := h.do(ctx, c, &ex, in)
	if err != nil {
		ex.refused = err.Error()
	}
	attrs := []slog.Attr{
		slog.String("program", c.Program()), slog.String("tool", c.Tool()),
		slog.String("method", ex.method), slog.String("host", ex.host),
		slog.Int("status", ex.status), slog.Int("bytes_out", ex.out), slog.Int("bytes_in", ex.in),
		slog.Duration("duration", time.Since(start)),
	}
	if err != nil {
		attrs = append(attrs, slog.String("refused", ex.refused))
	}
	h.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, SysHTTP, attrs...)
	if r := (*refusal)(nil); errors.As(err, &r) && r.host != "" {
		return c.Refuse(SysHTTP + ": " + ex.method + " " + r.Error()), nil
	} else if err != nil {
		return c.Refuse(SysHTTP + ": " + err.Error()), nil
	}
	return c.Stage(out), nil
}

// do makes the request and returns the framed response, or a *refusal.
func (h *httpHost) do(ctx context.Context, c *runtime.Call, ex *exchange, in [][]byte) ([]byte, error) {
	// The method, the URL and the headers are the program's bytes, of any
	// length: each is bounded before it is copied, and a message quotes a
	// prefix (quote), so that no refusal or log record is more than a
	// few hundred bytes of them.
	if len(in[0]) > maxMethod || !validToken(string(in[0])) {
		ex.method = quote(in[0], maxMethod)
		return nil, &refusal{"", "bad method " + ex.method}
	}
	ex.method = string(in[0])
	if len(in[1]) > MaxURL {
		return nil, &refusal{"", fmt.Sprintf("the URL of %d bytes is over the limit of %d bytes", len(in[1]), MaxURL)}
	}
	rawURL := string(in[1])
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, &refusal{"", "bad URL " + quote(rawURL, maxQuotedURL)}
	}
	ex.host = u.Host
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, &refusal{u.Host, "bad URL " + quote(rawURL, maxQuotedURL) + ": the scheme must be http or https"}
	case u.Hostname() == "":
		return nil, &refusal{"", "bad URL " + quote(rawURL, maxQuotedURL) + ": no host"}
	case !ascii(u.Host):
		return nil, &refusal{u.Host, "bad URL: the host must be ASCII (write an international name in its xn-- form)"}
	}
	port := urlPort(u)
	if port < 1 || port > 65535 {
		return nil, &refusal{u.Host, "bad URL " + quote(rawURL, maxQuotedURL) + ": the port is not 1 to 65535"}
	}
	if len(in[2]) > h.cfg.MaxHeaders {
		return nil, &refusal{u.Host, fmt.Sprintf("the request's headers of %d bytes are over the limit of %d bytes", len(in[2]), h.cfg.MaxHeaders)}
	}
	header, err := parseHeader(in[2])
	if err != nil {
		return nil, &refusal{u.Host, err.Error()}
	}
	if len(in[3]) > h.cfg.MaxRequest {
		return nil, &refusal{u.Host, fmt.Sprintf("the request's body of %d bytes is over the limit of %d bytes", len(in[3]), h.cfg.MaxRequest)}
	}
	g := c.Grants()
	if !g.AllowsHost(u.Hostname(), port) {
		return nil, notGranted(u.Hostname(), port)
	}
	gc := h.client(c.Program(), g)

	reqCtx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	var body io.Reader
	if len(in[3]) > 0 {
		// A copy: in aliases the program's memory, and the transport may
		// still be writing the body after the response has come.
		body = bytes.NewReader(bytes.Clone(in[3]))
	}
	req, err := http.NewRequestWithContext(reqCtx, ex.method, u.String(), body)
	if err != nil {
		return nil, &refusal{u.Host, fmt.Sprintf("bad request: %v", err)}
	}
	req.Header = header
	resp, err := gc.client.Do(req)
	if err != nil {
		return nil, h.explain(ctx, reqCtx, u.Host, err)
	}
	defer resp.Body.Close()
	ex.host, ex.status = resp.Request.URL.Host, resp.StatusCode
	// The body is read straight into the frame, after its length: one copy
	// fewer than reading it, then framing it.
	out := runtime.Frame([]byte(strconv.Itoa(resp.StatusCode)), headerBlock(resp.Header), nil)
	head := len(out)
	if n := resp.ContentLength; n > 0 && n <= int64(h.cfg.MaxResponse) {
		out = slices.Grow(out, int(n)+1) // +1: the read that finds the end
	}
	out, err = readAtMost(resp.Body, out, h.cfg.MaxResponse)
	ex.in = len(out) - head
	if err != nil {
		return nil, h.explain(ctx, reqCtx, ex.host, err)
	}
	if ex.in > h.cfg.MaxResponse {
		return nil, &refusal{ex.host, fmt.Sprintf("the response's body is over the limit of %d bytes (status %d)", h.cfg.MaxResponse, resp.StatusCode)}
	}
	binary.LittleEndian.PutUint32(out[head-4:], uint32(ex.in))
	return out, nil
}

// readAtMost appends r's bytes to b until EOF, or until more than limit
// were read.
func readAtMost(r io.Reader, b []byte, limit int) ([]byte, error) {
	start := len(b)
	for len(b)-start <= limit {
		if len(b) == cap(b) {
			b = slices.Grow(b, min(max(512, len(b)-start), limit+1-(len(b)-start)))
		}
		n, err := r.Read(b[len(b):min(cap(b), start+limit+1)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

// explain turns a failed request into a refusal the program can act on.
// It names the host and the failure, never the host's files: the errors of
// the network name none.
func (h *httpHost) explain(callCtx, reqCtx context.Context, host string, err error) error {
	var r *refusal
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostnameErr x509.HostnameError
	var invalidCert x509.CertificateInvalidError
	var netErr net.Error
	switch {
	case errors.As(err, &r):
		return r
	case callCtx.Err() != nil:
		return &refusal{host, "the call's deadline passed before the response was complete"}
	case reqCtx.Err() != nil || errors.As(err, &netErr) && netErr.Timeout():
		return &refusal{host, fmt.Sprintf("no complete response within %v", h.cfg.Timeout)}
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return &refusal{host, "DNS: no such host"}
		}
		return &refusal{host, "DNS: " + dnsErr.Err}
	case errors.Is(err, syscall.ECONNREFUSED):
		return &refusal{host, "connection refused"}
	case errors.Is(err, syscall.ECONNRESET):
		return &refusal{host, "connection reset by the server"}
	case strings.Contains(err.Error(), "server response headers exceeded"):
		// net/http's own error, which it does not export.
		return &refusal{host, fmt.Sprintf("the response's headers are over the limit of %d bytes", h.cfg.MaxHeaders)}
	case errors.As(err, &certErr):
		return &refusal{host, "TLS: the server's certificate does not verify: " + certErr.Err.Error()}
	case errors.As(err, &unknownCA), errors.As(err, &hostnameErr), errors.As(err, &invalidCert):
		return &refusal{host, "TLS: the server's certificate does not verify: " + err.Error()}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &refusal{host, err.Error()}
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// validToken reports whether s is an HTTP token (RFC 9110): a method or a
// header's name.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// parseHeader reads an HTTP/1 header block: "Name: value" lines separated
// by CRLF or LF; empty lines are skipped. Host is refused: the URL names the
// host, and a Host of another would reach a server the grant did not name.
func parseHeader(b []byte) (http.Header, error) {
	h := http.Header{}
	for line := range strings.SplitSeq(string(b), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if line == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || !validToken(name) {
			return nil, fmt.Errorf("bad header line %s: want Name: value", quote(line, maxQuotedHeader))
		}
		value = strings.Trim(value, " \t")
		if strings.ContainsFunc(value, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
			return nil, fmt.Errorf("bad header %s: its value holds a control character", cut(name, maxQuotedHeader))
		}
		if strings.EqualFold(name, "Host") {
			return nil, errors.New("bad header Host: the URL names the host")
		}
		h.Add(name, value)
	}
	return h, nil
}

// headerBlock writes h as "Name: value" lines, CRLF each, names sorted.
func headerBlock(h http.Header) []byte {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	sort.Strings(names)
	var b []byte
	for _, name := range names {
		for _, v := range h[name] {
			b = append(b, name...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	return b
}

// Bounds on what a refusal shows of the program's bytes.
const (
	// maxMethod bounds a method: the longest registered with IANA is 17
	// bytes (UPDATEREDIRECTREF).
	maxMethod       = 64
	maxQuotedURL    = 256
	maxQuotedHeader = 64
)

// quote is b quoted, cut to its first n bytes ("…" after the quote then,
// and its length).
func quote[T ~string | ~[]byte](b T, n int) string {
	if len(b) <= n {
		return strconv.Quote(string(b))
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(string(b[:n])), len(b))
}

// cut is s cut to its first n bytes, "…" after when it was cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
