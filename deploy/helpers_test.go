package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/internal/pgtest"
)

// nginxPath is Debian's nginx, which .ci/run installs.
const nginxPath = "/usr/sbin/nginx"

// bermBin is the berm binary TestMain builds once: the replicas are real
// processes, so that SIGKILL is real.
var bermBin string

func TestMain(m *testing.M) {
	flag.Parse()
	// Every test here needs PostgreSQL and nginx (servers): -short skips the
	// build too.
	if testing.Short() {
		pgtest.Main(m)
		return
	}
	dir, err := os.MkdirTemp("", "berm-deploy-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploy: temporary directory:", err)
		os.Exit(2)
	}
	bermBin = filepath.Join(dir, "berm")
	build := exec.Command("go", "build", "-o", bermBin, ".")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "deploy: go build berm: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	defer os.RemoveAll(dir)
	pgtest.Main(m)
}

// needServers skips a test that drives replicas when -short or nginx is
// missing; pgtest skips it when PostgreSQL is.
func needServers(t *testing.T, withNginx bool) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: needs PostgreSQL, nginx and berm serve processes")
	}
	if withNginx {
		if _, err := os.Stat(nginxPath); err != nil {
			t.Skipf("nginx is not installed (%s): apt-get install nginx (.ci/run does)", nginxPath)
		}
	}
}

// bermEnv is the environment of every berm process: nothing of the
// developer's own server, context or state leaks in.
func bermEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "BERM_SERVER", "BERM_CONTEXT", "BERM_TOKEN", "BERM_STATE", "BERM_ROOT", "BERM_ADDR":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// berm runs the berm CLI to completion and returns its stdout.
func berm(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(bermBin, args...)
	// Its compiled-code cache and config, apart from the developer's.
	cmd.Env = append(bermEnv(), "BERM_ROOT="+t.TempDir())
	cmd.Dir = ".."
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("berm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// replica is one berm serve process.
type replica struct {
	name string
	url  string // http://127.0.0.1:PORT
	cmd  *exec.Cmd
	log  *lockedBuffer
	// exited is closed once the process is reaped; err is then its end.
	exited chan struct{}
	err    error
	urls   <-chan string
}

// replicaOptions are how a replica is started.
type replicaOptions struct {
	// stateful leaves out --stateless, so that the replica keeps sessions
	// and sends tools/list_changed to its clients.
	stateful bool
}

// startReplica starts berm serve on state (a postgres:// URL) with a root
// of its own (its compiled-code cache), on a loopback port of the kernel's
// choosing, and returns once it listens; waitReady waits for /healthz.
func startReplica(t *testing.T, name, state string, opts replicaOptions) *replica {
	t.Helper()
	r := spawnReplica(t, name, state, opts)
	r.waitListen(t)
	return r
}

// spawnReplica starts the process and returns at once: waitListen waits
// for its address.
func spawnReplica(t *testing.T, name, state string, opts replicaOptions) *replica {
	t.Helper()
	args := []string{"serve", "--state", state, "--root", t.TempDir(),
		"--addr", "127.0.0.1:0", "--metrics", "--log-level", "info"}
	if !opts.stateful {
		args = append(args, "--stateless")
	}
	r := &replica{name: name, log: new(lockedBuffer), exited: make(chan struct{})}
	r.cmd = exec.Command(bermBin, args...)
	r.cmd.Env = bermEnv()
	stderr, err := r.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start replica %s: %v", name, err)
	}
	urls := make(chan string, 1)
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			r.log.WriteString(line + "\n")
			if u, ok := listenURL(line); ok {
				select {
				case urls <- u:
				default:
				}
			}
		}
	}()
	go func() {
		<-lines // Wait must not close the pipe under the scanner
		r.err = r.cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		r.stop()
		if t.Failed() {
			t.Logf("log of replica %s:\n%s", r.name, r.log.String())
		}
	})
	r.urls = urls
	return r
}

// waitListen waits until the replica logs the address it listens on.
func (r *replica) waitListen(t *testing.T) {
	t.Helper()
	select {
	case u := <-r.urls:
		r.url = strings.TrimSuffix(u, "/mcp")
	case <-r.exited:
		t.Fatalf("replica %s exited before listening: %v\n%s", r.name, r.err, r.log.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("replica %s did not listen within 30 s:\n%s", r.name, r.log.String())
	}
}

// listenURL finds the URL in berm serve's "listen" log line.
func listenURL(line string) (string, bool) {
	if !strings.Contains(line, "msg=listen ") {
		return "", false
	}
	for _, f := range strings.Fields(line) {
		if u, ok := strings.CutPrefix(f, "url="); ok {
			return u, true
		}
	}
	return "", false
}

// addr is the replica's host:port, as nginx names its upstream.
func (r *replica) addr() string { return strings.TrimPrefix(r.url, "http://") }

// running reports whether the process has not exited.
func (r *replica) running() bool {
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and returns once the process is reaped: from then on
// nothing it did not finish can still happen.
func (r *replica) kill(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill replica %s: %v", r.name, err)
	}
	<-r.exited
}

// stop ends the replica with SIGTERM, and SIGKILL if it lingers.
func (r *replica) stop() {
	if !r.running() {
		return
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(10 * time.Second):
		r.cmd.Process.Kill()
		<-r.exited
	}
}

// health is what GET /healthz answered.
type health struct {
	code     int
	status   string
	programs int
}

func (r *replica) health(ctx context.Context) (health, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url+"/healthz", nil)
	if err != nil {
		return health{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return health{}, err
	}
	defer resp.Body.Close()
	var body struct {
		Status   string `json:"status"`
		Programs int    `json:"programs"`
	}
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &body)
	return health{code: resp.StatusCode, status: body.Status, programs: body.Programs}, nil
}

// waitHealth polls /healthz until ok says so, or fails the test after
// timeout (generous: it bounds a wait, it measures nothing).
func (r *replica) waitHealth(t *testing.T, timeout time.Duration, what string, ok func(health) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last health
	var lastErr error
	for time.Now().Before(deadline) {
		if !r.running() {
			t.Fatalf("replica %s exited while waiting for %s: %v", r.name, what, r.err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		last, lastErr = r.health(ctx)
		cancel()
		if lastErr == nil && ok(last) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("replica %s: not %s within %s: last /healthz %d %q (%v)", r.name, what, timeout, last.code, last.status, lastErr)
}

// waitReady waits for /healthz 200 with at least programs served.
func (r *replica) waitReady(t *testing.T, programs int) {
	t.Helper()
	r.waitHealth(t, 30*time.Second, fmt.Sprintf("ready with %d programs", programs), func(h health) bool {
		return h.code == http.StatusOK && h.programs >= programs
	})
}

// metric sums the samples of a Prometheus counter at /metrics whose labels
// include every one of labels (as `name="value"`).
func (r *replica) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get(r.url + "/metrics")
	if err != nil {
		t.Fatalf("replica %s: /metrics: %v", r.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("replica %s: /metrics: %s", r.name, resp.Status)
	}
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
lines:
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue lines
			}
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("replica %s: /metrics line %q: %v", r.name, line, err)
		}
		sum += v
	}
	return sum
}

// putProgram deploys an image through the replica's control API, as
// `berm deploy --server` does, without spawning a process per deploy.
func (r *replica) putProgram(ctx context.Context, name string, image []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, r.url+"/v1/programs/"+name, bytes.NewReader(image))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/wasm")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT %s/v1/programs/%s: %s: %s", r.url, name, resp.Status, body)
	}
	return nil
}

// balancer is nginx, round robin over replicas.
type balancer struct {
	url string // http://127.0.0.1:PORT
	cmd *exec.Cmd
	dir string
}

// upstreamHeader names the replica (host:port) that answered through
// nginx, so that a client knows which one acknowledged a write.
const upstreamHeader = "X-Berm-Upstream"

// startNginx starts nginx in front of replicas. Its upstream keeps no
// idle connections: a killed replica's kept-alive connections would make
// the first requests after the kill fail for a reason that is nginx's, not
// berm's; a fresh connection to a dead port is refused at once and nginx
// passes the request (not yet sent) to the next replica.
func startNginx(t *testing.T, replicas ...*replica) *balancer {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	var upstreams strings.Builder
	for _, r := range replicas {
		fmt.Fprintf(&upstreams, "\t\tserver %s;\n", r.addr())
	}
	user := ""
	if os.Geteuid() == 0 {
		// Workers would run as nobody, who cannot enter the test's
		// temporary directories.
		user = "user root;"
	}
	conf := fmt.Sprintf(`%s
worker_processes 1;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
events { worker_connections 1024; }
http {
	log_format upstream '$request $status $upstream_addr $upstream_status';
	access_log %[2]s/access.log upstream;
	client_body_temp_path %[2]s/body;
	proxy_temp_path %[2]s/proxy;
	fastcgi_temp_path %[2]s/fastcgi;
	uwsgi_temp_path %[2]s/uwsgi;
	scgi_temp_path %[2]s/scgi;
	upstream berm {
%[3]s	}
	server {
		listen 127.0.0.1:%[4]d;
		location / {
			proxy_pass http://berm;
			proxy_http_version 1.1;
			# berm answers only loopback names on loopback (DNS rebinding):
			# pass the client's Host, not "berm".
			proxy_set_header Host $http_host;
			# Streamable HTTP answers with server-sent events.
			proxy_buffering off;
			proxy_read_timeout 1h;
			add_header %[5]s $upstream_addr always;
		}
	}
}
`, user, dir, upstreams.String(), port, upstreamHeader)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &balancer{url: fmt.Sprintf("http://127.0.0.1:%d", port), dir: dir}
	b.cmd = exec.Command(nginxPath, "-e", filepath.Join(dir, "error.log"), "-p", dir, "-c", confPath, "-g", "daemon off;")
	var out lockedBuffer
	b.cmd.Stdout, b.cmd.Stderr = &out, &out
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("start nginx: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- b.cmd.Wait() }()
	t.Cleanup(func() {
		// SIGTERM: nginx's fast shutdown; its workers go with the master.
		b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			b.cmd.Process.Kill()
		}
		if t.Failed() {
			logs, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("nginx error.log:\n%s%s", logs, out.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", b.addr(), time.Second)
		if err == nil {
			conn.Close()
			return b
		}
		select {
		case err := <-exited:
			logs, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %v\n%s%s", err, out.String(), logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx does not listen on %s after 10 s", b.addr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (b *balancer) addr() string { return strings.TrimPrefix(b.url, "http://") }

// freePort is a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// client is an MCP client session over streamable HTTP that knows which
// replica answered its last request through nginx.
type client struct {
	*mcp.ClientSession
	upstream *upstreamRecorder
}

// connect opens an MCP session at base (a replica or nginx). A stateless
// replica has no stream for server-initiated messages, so the client opens
// none unless opts asks for notifications (standalone).
func connect(t *testing.T, ctx context.Context, base string, opts *mcp.ClientOptions, standalone bool) *client {
	t.Helper()
	rec := &upstreamRecorder{base: http.DefaultTransport.(*http.Transport).Clone()}
	transport := &mcp.StreamableClientTransport{
		Endpoint:             base + "/mcp",
		HTTPClient:           &http.Client{Transport: rec},
		DisableStandaloneSSE: !standalone,
		MaxRetries:           -1,
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "berm-deploy-test", Version: "0"}, opts).Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v", base, err)
	}
	t.Cleanup(func() { cs.Close() })
	return &client{ClientSession: cs, upstream: rec}
}

// upstreamRecorder remembers the upstreamHeader of the last response.
type upstreamRecorder struct {
	base http.RoundTripper
	last atomic.Pointer[string]
}

func (u *upstreamRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := u.base.RoundTrip(req)
	if err == nil {
		s := resp.Header.Get(upstreamHeader)
		u.last.Store(&s)
	}
	return resp, err
}

// Last is the replica that answered the last request, "" if none said.
func (u *upstreamRecorder) Last() string {
	if p := u.last.Load(); p != nil {
		return *p
	}
	return ""
}

// errToolFailed is a call that the server answered with isError: the
// program's failure or the host's refusal of its arguments.
var errToolFailed = errors.New("tool result is an error")

// call calls a tool and returns the text of its result. A result with
// isError is errToolFailed with its text; any other error is the
// protocol's or the transport's.
func (c *client) call(ctx context.Context, tool string, args any) (string, error) {
	res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", err
	}
	var text strings.Builder
	for _, content := range res.Content {
		if tc, ok := content.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return text.String(), fmt.Errorf("%s: %w: %s", tool, errToolFailed, text.String())
	}
	return text.String(), nil
}

// tools lists the names of the tools served.
func (c *client) tools(ctx context.Context) (map[string]bool, error) {
	names := map[string]bool{}
	for tool, err := range c.ClientSession.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		names[tool.Name] = true
	}
	return names, nil
}

// lockedBuffer is a bytes.Buffer that a process's output and a test read
// at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) WriteString(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// readFixture reads a file of the repository's testdata.
func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
