package mcpserve_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/internal/control"
	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/store"
)

// serveHTTP starts the HTTP service of a loaded server on loopback: it
// returns once the programs found at start are loaded, when /readyz says
// so.
func (h *harness) serveHTTP(t *testing.T, cfg mcpserve.HTTPConfig) *httptest.Server {
	t.Helper()
	h.start(t)
	<-h.srv.Loaded()
	if cfg.Control == nil {
		cfg.Control = control.Handler(h.svc, control.ServerOptions{TakesGrants: cfg.Token != ""})
	}
	ts := httptest.NewServer(h.srv.Handler(cfg))
	t.Cleanup(ts.Close)
	return ts
}

// bearer adds a token to every request of a client.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func connectHTTP(t *testing.T, url string, client *http.Client) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: client}, &mcp.ClientSessionOptions{ProtocolVersion: legacy})
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func TestHTTPServesMCP(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	h.deploy(t, "echo", "echo.wasm")
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{})
	cs, err := connectHTTP(t, ts.URL+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := call(t, cs, "echo_echo", map[string]any{"message": "over http"})
	if err != nil || text(t, res) != `{"message":"over http"}` {
		t.Fatalf("echo_echo: %+v, %v", res, err)
	}
	resp, err := http.Get(ts.URL + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	}
}

func TestHTTPToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	h.deploy(t, "echo", "echo.wasm")
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{Token: "s3cret"})

	if _, err := connectHTTP(t, ts.URL+"/mcp", nil); err == nil {
		t.Fatal("connected without the token")
	}
	refused(t, postMCP(t, nil, ts.URL, "", initBody), http.StatusUnauthorized, "unauthorized")
	if _, err := connectHTTP(t, ts.URL+"/mcp", &http.Client{Transport: bearer{"wrong", http.DefaultTransport}}); err == nil {
		t.Fatal("connected with a wrong token")
	}
	cs, err := connectHTTP(t, ts.URL+"/mcp", &http.Client{Transport: bearer{"s3cret", http.DefaultTransport}})
	if err != nil {
		t.Fatalf("with the token: %v", err)
	}
	if _, err := call(t, cs, "echo_echo", nil); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/programs", "/v1/programs/echo"} {
		resp, err := http.Get(ts.URL + path)
		if err != nil || resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("GET %s without the token: %v %v", path, resp.Status, err)
		}
	}
	// Load balancers need no token.
	if resp, err := http.Get(ts.URL + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("healthz: %v %v", resp, err)
	}
}

func TestHTTPBodyLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{MaxBody: 1024, MaxImage: 2048})
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("x", 2048) + `"}}`
	refused(t, postMCP(t, nil, ts.URL, "", big), http.StatusRequestEntityTooLarge, "too_large")
	id := openSession(t, nil, ts.URL)
	refused(t, postMCP(t, nil, ts.URL, id, big), http.StatusRequestEntityTooLarge, "too_large")
	client, _ := control.NewClient(ts.URL, "")
	_, err := client.Deploy(context.Background(), "big", make([]byte, 4096), "", nil)
	if !errors.Is(err, runtime.ErrRefused) || !strings.Contains(err.Error(), "2048") {
		t.Fatalf("an oversized image: %v", err)
	}
}

func TestControlAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{Token: "tok"})
	ctx := context.Background()
	client, err := control.NewClient(ts.URL, "tok")
	if err != nil {
		t.Fatal(err)
	}
	image, _ := os.ReadFile("../testdata/echo.wasm")

	info, err := client.Deploy(ctx, "echo", image, "echo.wasm", nil)
	if err != nil || info.Digest != manifest.Digest(image) || len(info.Tools) != 1 || info.Source != "echo.wasm" {
		t.Fatalf("Deploy = %+v, %v", info, err)
	}
	// Served at once, without waiting for a poll.
	if got := h.srv.Programs()["echo"]; len(got) != 1 || got[0] != "echo_echo" {
		t.Fatalf("served after the PUT: %v", h.srv.Programs())
	}
	list, err := client.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "echo" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	d, err := client.Inspect(ctx, "echo")
	if err != nil || d.Name != "echo" || d.Size != len(image) || d.Manifest == nil || d.Tools[0].Name != "echo" {
		t.Fatalf("Inspect = %+v, %v", d, err)
	}

	broken, _ := os.ReadFile("../testdata/broken/no_memory.wasm")
	tests := []struct {
		name  string
		do    func() error
		want  error
		words string
	}{
		{"invalid image", func() error { _, err := client.Deploy(ctx, "x", broken, "", nil); return err }, manifest.ErrInvalid, "does not export its memory as"},
		{"bad name", func() error { _, err := client.Deploy(ctx, "Bad_Name", image, "", nil); return err }, manifest.ErrProgramName, "Bad_Name"},
		{"inspect absent", func() error { _, err := client.Inspect(ctx, "ghost"); return err }, store.ErrNotDeployed, "ghost"},
		{"remove absent", func() error { return client.Remove(ctx, "ghost", false) }, store.ErrNotDeployed, "ghost"},
		{"unservable", func() error { _, err := client.Deploy(ctx, "bad", unservableImage(t), "", nil); return err }, runtime.ErrRefused, "cannot be served"},
		{"wrong token", func() error {
			c, _ := control.NewClient(ts.URL, "nope")
			_, err := c.List(ctx)
			return err
		}, control.ErrUnauthorized, "bearer token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.words) {
				t.Fatalf("err = %v, want %v naming %q", err, tt.want, tt.words)
			}
		})
	}
	// The refusals changed nothing.
	if list, _ := client.List(ctx); len(list) != 1 {
		t.Fatalf("after refusals: %+v", list)
	}
	if err := client.Remove(ctx, "echo", false); err != nil {
		t.Fatal(err)
	}
	if len(h.srv.Programs()) != 0 {
		t.Fatalf("served after DELETE: %v", h.srv.Programs())
	}
}

func TestRunHTTPNeedsTokenBeyondLoopback(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	err := h.srv.RunHTTP(context.Background(), mcpserve.HTTPConfig{Addr: "0.0.0.0:0"}, time.Second)
	if !errors.Is(err, mcpserve.ErrNeedsToken) {
		t.Fatalf("RunHTTP on 0.0.0.0 without a token: %v", err)
	}
	for addr, want := range map[string]bool{
		"127.0.0.1:7777": true, "localhost:1": true, "[::1]:80": true, "127.0.0.2:1": true,
		"0.0.0.0:7777": false, ":7777": false, "10.0.0.1:80": false, "example.com:80": false,
	} {
		if got := mcpserve.IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v", addr, got)
		}
	}
}

// TestRunHTTPTLS serves HTTPS with a self-signed certificate and shuts down
// when its context ends.
func TestRunHTTPTLS(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	h.deploy(t, "echo", "echo.wasm")
	certFile, keyFile, pool := selfSigned(t)
	ctx, cancel := context.WithCancel(context.Background())
	h.start(t)
	addrs := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- h.srv.RunHTTP(ctx, mcpserve.HTTPConfig{
			Addr: "127.0.0.1:0", TLSCert: certFile, TLSKey: keyFile,
			Listening: func(a net.Addr) { addrs <- a },
		}, time.Second)
	}()
	addr := <-addrs
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	cs, err := connectHTTP(t, "https://"+addr.String()+"/mcp", client)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := call(t, cs, "echo_echo", map[string]any{"tls": true}); err != nil || text(t, res) != `{"tls":true}` {
		t.Fatalf("over TLS: %+v, %v", res, err)
	}
	if _, err := http.Get("http://" + addr.String() + "/healthz"); err == nil {
		// A plain request to a TLS port gets a 400 from net/http, not a 200.
		resp, _ := http.Get("http://" + addr.String() + "/healthz")
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP answered on the TLS port")
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Fatalf("RunHTTP: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RunHTTP did not return after its context ended")
	}
}

func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "berm test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}
