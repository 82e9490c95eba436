package deploy_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/deploy/internal/replicas"
	"github.com/berm-dev/berm/internal/pgtest"
)

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
		if _, err := os.Stat(replicas.NginxPath); err != nil {
			t.Skipf("nginx is not installed (%s): apt-get install nginx (.ci/run does)", replicas.NginxPath)
		}
	}
}

// berm runs the berm CLI to completion, from the repository's top (so that
// testdata/ resolves), and returns its stdout.
func berm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := replicas.CLI{Bin: bermBin, Root: t.TempDir(), Dir: ".."}.Run(context.Background(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// replica is one berm serve process, with the test's ways to wait on it.
type replica struct{ *replicas.Replica }

// replicaOptions are how a test starts a replica.
type replicaOptions struct {
	// stateful leaves out --stateless, so that the replica keeps sessions
	// and sends tools/list_changed to its clients.
	stateful bool
}

// spawnReplica starts berm serve on state (a postgres:// URL) with a root
// of its own (its compiled-code cache), on a loopback port of the kernel's
// choosing, and returns at once: waitListen waits for its address. The
// test's cleanup stops it and, when the test failed, logs its log.
func spawnReplica(t *testing.T, name, state string, opts replicaOptions) *replica {
	t.Helper()
	r, err := replicas.Spawn(name, replicas.Options{
		Bin: bermBin, State: state, Root: t.TempDir(), Stateful: opts.stateful, Metrics: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Stop()
		if t.Failed() {
			t.Logf("log of replica %s:\n%s", r.Name, r.Log())
		}
	})
	return &replica{r}
}

// startReplicas starts n stateless replicas on state at once and waits
// until each serves programs programs.
func startReplicas(t *testing.T, state string, n, programs int) []*replica {
	t.Helper()
	rs := make([]*replica, n)
	for i := range rs {
		rs[i] = spawnReplica(t, fmt.Sprintf("r%d", i), state, replicaOptions{})
	}
	for _, r := range rs {
		r.waitListen(t)
		r.waitReady(t, programs)
	}
	return rs
}

// echoAndKVBehindNginx deploys the echo and kv programs on state, starts n
// replicas on it and nginx in front of them.
func echoAndKVBehindNginx(t *testing.T, state string, n int) ([]*replica, *replicas.Balancer) {
	t.Helper()
	berm(t, "deploy", "--state", state, "echo", "testdata/echo.wasm")
	berm(t, "deploy", "--state", state, "kv", "testdata/kv.wasm")
	rs := startReplicas(t, state, n, 2)
	return rs, startNginx(t, rs...)
}

// waitListen waits until the replica listens.
func (r *replica) waitListen(t *testing.T) {
	t.Helper()
	if err := r.WaitListen(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// waitReady waits until the replica takes calls (/readyz) with at least
// programs served.
func (r *replica) waitReady(t *testing.T, programs int) {
	t.Helper()
	if err := r.WaitReady(programs, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

// waitHealth polls path until ok says so, or fails the test after timeout.
func (r *replica) waitHealth(t *testing.T, path string, timeout time.Duration, what string, ok func(replicas.Health) bool) {
	t.Helper()
	if err := r.WaitHealth(path, timeout, what, ok); err != nil {
		t.Fatal(err)
	}
}

// kill sends SIGKILL and returns once the process is reaped.
func (r *replica) kill(t *testing.T) {
	t.Helper()
	if err := r.Kill(); err != nil {
		t.Fatalf("kill replica %s: %v", r.Name, err)
	}
}

// metric sums the samples of a counter at /metrics (Replica.Metric).
func (r *replica) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, err := r.Metric(name, labels...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// startNginx starts nginx in front of replicas, with the test's settings
// (replicas.NginxOptions).
func startNginx(t *testing.T, rs ...*replica) *replicas.Balancer {
	t.Helper()
	var upstreams []string
	for _, r := range rs {
		upstreams = append(upstreams, r.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lb, err := replicas.StartNginx(ctx, replicas.NginxOptions{Dir: t.TempDir(), Upstreams: upstreams})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		lb.Stop()
		if t.Failed() {
			t.Logf("nginx's error.log and output:\n%s", lb.Log())
		}
	})
	return lb
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

// upstreamRecorder remembers the replicas.UpstreamHeader of the last response.
type upstreamRecorder struct {
	base http.RoundTripper
	last atomic.Pointer[string]
}

func (u *upstreamRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := u.base.RoundTrip(req)
	if err == nil {
		s := resp.Header.Get(replicas.UpstreamHeader)
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

// readFixture reads a file of the repository's testdata.
func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
