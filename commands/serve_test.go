package commands_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tests here drive the built binary as a user and an MCP client would:
// separate processes sharing one root.

var (
	buildOnce sync.Once
	bermBin   string
	buildErr  error
)

// bermBinary builds berm once for the tests of this package.
func bermBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "berm-bin-")
		if err != nil {
			buildErr = err
			return
		}
		bermBin = filepath.Join(dir, "berm")
		out, err := exec.Command("go", "build", "-o", bermBin, "..").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bermBin
}

// bermCmd runs berm with BERM_ROOT set to root.
func bermCmd(t *testing.T, root string, args ...string) *exec.Cmd {
	cmd := exec.Command(bermBinary(t), args...)
	cmd.Env = append(os.Environ(), "BERM_ROOT="+root, "BERM_SERVER=", "BERM_TOKEN=")
	return cmd
}

func berm(t *testing.T, root string, args ...string) string {
	t.Helper()
	out, err := bermCmd(t, root, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("berm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func fixturePath(name string) string { return filepath.Join("..", "testdata", name) }

func connectStdio(t *testing.T, root string, opts *mcp.ClientOptions, args ...string) (*mcp.ClientSession, *exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := bermCmd(t, root, append([]string{"serve", "--stdio"}, args...)...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "test"}, opts)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, cmd, stderr
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func toolNames(t *testing.T, cs *mcp.ClientSession) map[string]bool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range res.Tools {
		names[tool.Name] = true
	}
	return names
}

func callText(t *testing.T, cs *mcp.ClientSession, name string, args any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

func TestServeStdio(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	berm(t, root, "deploy", "echo", fixturePath("echo.wasm"))
	changed := make(chan struct{}, 8)
	cs, _, stderr := connectStdio(t, root, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}, "--log-level", "info")
	if got := callText(t, cs, "echo_echo", map[string]any{"message": "hi"}); got != `{"message":"hi"}` {
		t.Fatalf("echo_echo = %q", got)
	}
	// Another process deploys while the server runs: served within a second.
	berm(t, root, "deploy", "core", fixturePath("core.wasm"))
	select {
	case <-changed:
	case <-time.After(time.Second):
		t.Fatal("no tools/list_changed within a second of berm deploy")
	}
	if !toolNames(t, cs)["core_fail"] {
		t.Fatal("core_fail not served after berm deploy")
	}
	berm(t, root, "rm", "echo")
	select {
	case <-changed:
	case <-time.After(time.Second):
		t.Fatal("no tools/list_changed within a second of berm rm")
	}
	if toolNames(t, cs)["echo_echo"] {
		t.Fatal("echo_echo still served after berm rm")
	}
	// Logs go to stderr, as structured records, never to stdout (the
	// client above would have choked on them).
	if !strings.Contains(stderr.String(), "msg=call request_id=") || !strings.Contains(stderr.String(), "program=echo") {
		t.Errorf("stderr has no call record:\n%s", stderr)
	}
}

// TestServeStdioQuiet: with --stdio and no --log-level, only warnings and
// errors reach stderr (Claude Code shows each stderr line as an error): no
// serve or call lines.
func TestServeStdioQuiet(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	berm(t, root, "deploy", "echo", fixturePath("echo.wasm"))
	cs, _, stderr := connectStdio(t, root, nil)
	if got := callText(t, cs, "echo_echo", map[string]any{"message": "hi"}); got != `{"message":"hi"}` {
		t.Fatalf("echo_echo = %q", got)
	}
	cs.Close()
	for _, info := range []string{"level=INFO", "msg=serve", "msg=call"} {
		if strings.Contains(stderr.String(), info) {
			t.Errorf("stderr has %q at the default level of --stdio:\n%s", info, stderr)
		}
	}
}

// TestServeCallOutcomes: the call's log line names its outcome in the words
// of /metrics (refused, trap, deadline, limit), not "error" for them all.
func TestServeCallOutcomes(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	berm(t, root, "deploy", "core", fixturePath("core.wasm"))
	cs, _, stderr := connectStdio(t, root, nil, "--timeout", "300ms")
	for _, c := range []struct {
		tool    string
		args    any
		outcome string
	}{
		{"core_strict", map[string]any{"n": "three"}, "refused"},
		{"core_trap", nil, "trap"},
		{"core_loop", nil, "deadline"},
		{"core_big_result", nil, "limit"},
	} {
		cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		want := regexp.MustCompile(`tool=` + strings.TrimPrefix(c.tool, "core_") + ` .*outcome=` + c.outcome + ` `)
		// The line is written before the response, but stderr reaches the
		// buffer through a pipe of its own.
		for end := time.Now().Add(10 * time.Second); !want.MatchString(stderr.String()) && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
		if !want.MatchString(stderr.String()) {
			t.Errorf("%s: no call line with outcome=%s:\n%s", c.tool, c.outcome, stderr)
		}
	}
}

func TestServeStdioNothingDeployed(t *testing.T) {
	t.Parallel()
	cs, _, _ := connectStdio(t, t.TempDir(), nil)
	if names := toolNames(t, cs); len(names) != 0 {
		t.Fatalf("tools = %v", names)
	}
}

// TestServeSIGTERM: a call in flight when SIGTERM arrives finishes, and the
// server exits 0.
func TestServeSIGTERM(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	berm(t, root, "deploy", "core", fixturePath("core.wasm"))
	cs, cmd, stderr := connectStdio(t, root, nil, "--log-level", "info")
	callText(t, cs, "core_echo", nil) // compiled and ready
	done := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "core_busy"})
		if err != nil {
			done <- err.Error()
			return
		}
		done <- res.Content[0].(*mcp.TextContent).Text
	}()
	// busy logs before it works: once its line is on stderr, it is in flight.
	inFlight := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), "line=busy") {
		select {
		case got := <-done:
			t.Fatalf("core_busy ended before it was seen in flight: %q\nstderr:\n%s", got, stderr)
		default:
		}
		if time.Now().After(inFlight) {
			t.Fatalf("core_busy not in flight after 10s\nstderr:\n%s", stderr)
		}
		time.Sleep(time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if got != "ok" {
			t.Fatalf("the call in flight: %q\nstderr:\n%s", got, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight never finished")
	}
	// The transport reaps the process when the session ends.
	exited := make(chan error, 1)
	go func() { exited <- cs.Wait() }()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("berm serve did not exit after SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("berm serve exited %d\nstderr:\n%s", code, stderr)
	}
}

var listenURL = regexp.MustCompile(`msg=listen url=(\S+)/mcp`)

// startHTTP runs berm serve over HTTP on a free loopback port and returns
// its base URL.
func startHTTP(t *testing.T, root string, args ...string) string {
	t.Helper()
	return startHTTPEnv(t, root, nil, args...)
}

// startHTTPEnv is startHTTP with more environment.
func startHTTPEnv(t *testing.T, root string, env []string, args ...string) string {
	t.Helper()
	cmd := bermCmd(t, root, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		if m := listenURL.FindStringSubmatch(lines.Text()); m != nil {
			go io.Copy(io.Discard, stderr)
			return m[1]
		}
	}
	t.Fatal("berm serve never said where it listens")
	return ""
}

func TestServeHTTPControl(t *testing.T) {
	t.Parallel()
	serverRoot, clientRoot := t.TempDir(), t.TempDir()
	base := startHTTP(t, serverRoot, "--token", "tok")

	// Without the token, the control API refuses, with a hint.
	cmd := bermCmd(t, clientRoot, "ls", "--server", base)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "bearer token") {
		t.Fatalf("ls without a token: %v\n%s", err, out)
	}
	out = []byte(berm(t, clientRoot, "deploy", "--server", base, "--token", "tok", "echo", fixturePath("echo.wasm")))
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}\n$`).Match(out) {
		t.Fatalf("deploy --server printed %q", out)
	}
	if out := berm(t, clientRoot, "ls", "--server", base, "--token", "tok"); !regexp.MustCompile(`(?m)^echo +[0-9a-f]{12} +echo +- +\S+$`).MatchString(out) {
		t.Fatalf("ls --server:\n%s", out)
	}
	// The client's own root is untouched; the server's holds the deployment.
	if out := berm(t, clientRoot, "ls"); strings.Contains(out, "echo") {
		t.Fatalf("the client's root got the deployment:\n%s", out)
	}
	if out := berm(t, serverRoot, "ls"); !strings.Contains(out, "echo") {
		t.Fatalf("the server's root lacks the deployment:\n%s", out)
	}
	if out := berm(t, clientRoot, "inspect", "--server", base, "--token", "tok", "echo"); !strings.Contains(out, "A fixture that echoes") {
		t.Fatalf("inspect --server:\n%s", out)
	}
	// Errors come back as clearly as local ones, with the same exit code.
	cmd = bermCmd(t, clientRoot, "deploy", "--server", base, "--token", "tok", "bad", fixturePath("broken/no_memory.wasm"))
	out, err = cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 || !strings.Contains(string(out), "does not export its memory as") {
		t.Fatalf("deploy of a broken image: %v\n%s", err, out)
	}
	cmd = bermCmd(t, clientRoot, "rm", "--server", base, "--token", "tok", "ghost")
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not deployed") || !strings.Contains(string(out), "hint:") {
		t.Fatalf("rm of an absent program: %v\n%s", err, out)
	}
	berm(t, clientRoot, "rm", "--server", base, "--token", "tok", "echo")
	if out := berm(t, serverRoot, "ls"); strings.Contains(out, "echo") {
		t.Fatalf("rm --server left the deployment:\n%s", out)
	}
}

func TestServeRefusesOpenAddressWithoutToken(t *testing.T) {
	t.Parallel()
	cmd := bermCmd(t, t.TempDir(), "serve", "--addr", "0.0.0.0:0")
	out, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 || !strings.Contains(string(out), "needs a token") {
		t.Fatalf("serve on 0.0.0.0 without a token: %v\n%s", err, out)
	}
}

// TestServeBusyAddress: a second berm serve on a busy address fails at once
// (before loading anything), says who holds it, and what to do: use the
// berm serve running there, or another --addr. It said only "address
// already in use".
func TestServeBusyAddress(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	base := startHTTP(t, root)
	addr := strings.TrimPrefix(base, "http://")
	out, err := bermCmd(t, root, "serve", "--addr", addr).CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 {
		t.Fatalf("a second berm serve on %s: %v\n%s", addr, err, out)
	}
	host, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	for _, want := range []string{
		"listen on " + addr + ": address already in use: by a berm serve already running",
		"berm: hint: use the server already running (its MCP endpoint is " + base + "/mcp)",
		"berm serve --addr " + net.JoinHostPort(host, strconv.Itoa(n+1)),
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("a second berm serve on %s says\n%s\nwant %q", addr, out, want)
		}
	}

	// Something else: a server that is not berm's.
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	addr = other.Listener.Addr().String()
	out, err = bermCmd(t, root, "serve", "--addr", addr).CombinedOutput()
	_, port, _ = net.SplitHostPort(addr)
	if err == nil || !strings.Contains(string(out), "by another program (not berm serve") ||
		!strings.Contains(string(out), "stop what holds port "+port) {
		t.Errorf("berm serve on an address another server holds: %v\n%s", err, out)
	}
}
