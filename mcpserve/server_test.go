package mcpserve_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/internal/mcpservice"
	"github.com/berm-dev/berm/internal/service"
	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/host"
	"github.com/berm-dev/berm/runtime/store"
)

// legacy is the newest protocol Claude Code and the Inspector speak; the Go
// client would otherwise pick 2026-07-28, where logging works differently.
const legacy = "2025-11-25"

type harness struct {
	st  *store.Store
	rt  *runtime.Runtime
	svc *service.Service
	srv *mcpserve.Server
}

func newHarness(t testing.TB, limits runtime.Limits, opts *mcpserve.Options) *harness {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{st: st}
	h.rt, err = runtime.New(ctx, runtime.Config{
		Syscalls:     host.Syscalls(st),
		CacheDir:     st.CacheDir(),
		Limits:       limits,
		Imports:      []runtime.HostModule{host.WASI()},
		ModuleConfig: host.ModuleConfig(),
		Log:          func(ctx context.Context, p, tool string, line []byte) { h.srv.Log(ctx, p, tool, line) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.rt.Close(ctx) })
	h.build(opts)
	return h
}

// build makes the harness's service and server anew, polling the store often.
func (h *harness) build(opts *mcpserve.Options) {
	if opts == nil {
		opts = &mcpserve.Options{}
	}
	h.svc = service.New(h.rt, h.st, &service.Options{
		Check:        mcpserve.Checker(opts.Naming),
		Logger:       opts.Logger,
		PollInterval: 50 * time.Millisecond,
	})
	h.srv = mcpserve.New(mcpservice.New(h.svc), opts)
}

// start serves what the store holds until the test ends; the server is
// closed (every goroutine stopped) before the runtime.
func (h *harness) start(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	if err := h.srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.srv.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
}

// deploy deploys a fixture as berm deploy does, through another runtime (as
// another process would).
func (h *harness) deploy(t testing.TB, name, file string) {
	t.Helper()
	image, err := os.ReadFile(filepath.Join("..", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	other, err := runtime.New(ctx, runtime.Config{CacheDir: h.st.CacheDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	svc := service.New(other, h.st, &service.Options{Check: mcpserve.Checker(mcpserve.Underscore)})
	if _, err := svc.Deploy(ctx, name, image, file, nil); err != nil {
		t.Fatal(err)
	}
}

// connect loads the server and connects a client over in-memory transports.
func (h *harness) connect(t *testing.T, copts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.start(t)
	st, ct := mcp.NewInMemoryTransports()
	go h.srv.MCP().Run(ctx, st)
	client := mcp.NewClient(&mcp.Implementation{Name: "test"}, copts)
	cs, err := client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: legacy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any) (*mcp.CallToolResult, error) {
	t.Helper()
	return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("content = %+v, want one item", res.Content)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content = %T, want text", res.Content[0])
	}
	return tc.Text
}

func rpcCode(err error) int64 {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return 0
}

func TestToolsAndOutcomes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{Deadline: 500 * time.Millisecond}, nil)
	h.deploy(t, "core", "core.wasm")
	h.deploy(t, "echo", "echo.wasm")
	cs := h.connect(t, nil)

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tool := range tools.Tools {
		byName[tool.Name] = tool
	}
	echo := byName["echo_echo"]
	if echo == nil || byName["core_strict"] == nil || byName["core_trap"] == nil {
		t.Fatalf("tools = %v", tools.Tools)
	}
	if !strings.Contains(echo.Description, "Returns its arguments") || !strings.Contains(echo.Description, "A fixture that echoes") {
		t.Errorf("echo_echo description = %q, want the tool's and the program's words", echo.Description)
	}
	schema, _ := json.Marshal(echo.InputSchema)
	if !strings.Contains(string(schema), `"message"`) {
		t.Errorf("echo_echo input schema = %s", schema)
	}

	tests := []struct {
		tool     string
		args     any
		text     string // the content's text
		isError  bool
		code     int64 // a JSON-RPC error's code
		words    string
		structed bool
	}{
		{tool: "echo_echo", args: map[string]any{"message": "hi"}, text: `{"message":"hi"}`, structed: true},
		{tool: "core_empty", args: map[string]any{}, text: ""},
		{tool: "core_fail", args: map[string]any{}, text: "it failed on purpose", isError: true},
		{tool: "core_result_then_fail", text: "failure wins", isError: true},
		{tool: "core_strict", args: map[string]any{"n": "three"}, isError: true, words: "at /n: got string, want integer"},
		{tool: "core_strict", args: map[string]any{}, isError: true, words: "missing property"},
		{tool: "core_strict", args: map[string]any{"n": 3}, text: "ok"},
		{tool: "core_trap", code: mcpserve.CodeTrap, words: "core.trap: program trapped: wasm error: unreachable"},
		{tool: "core_unknown_syscall", code: mcpserve.CodeTrap, words: "0x1234"},
		{tool: "core_loop", code: mcpserve.CodeDeadline, words: "deadline"},
		{tool: "core_big_result", code: mcpserve.CodeLimit, words: "over the size limit: result of 17825792 bytes"},
		{tool: "core_nope", code: jsonrpc.CodeInvalidParams, words: "core_nope"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %v", tt.tool, tt.args), func(t *testing.T) {
			res, err := call(t, cs, tt.tool, tt.args)
			if tt.code != 0 {
				if rpcCode(err) != tt.code || !strings.Contains(err.Error(), tt.words) {
					t.Fatalf("err = %v (code %d), want code %d naming %q", err, rpcCode(err), tt.code, tt.words)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError != tt.isError {
				t.Fatalf("isError = %v, want %v (%+v)", res.IsError, tt.isError, res.Content)
			}
			got := text(t, res)
			if tt.words != "" && !strings.Contains(got, tt.words) {
				t.Fatalf("text %q does not name %q", got, tt.words)
			}
			if tt.words == "" && got != tt.text {
				t.Fatalf("text = %q, want %q", got, tt.text)
			}
			if (res.StructuredContent != nil) != tt.structed {
				t.Fatalf("structured content = %v, want it %v", res.StructuredContent, tt.structed)
			}
		})
	}

	t.Run("not UTF-8", func(t *testing.T) {
		res, err := call(t, cs, "core_binary", nil)
		if err != nil {
			t.Fatal(err)
		}
		er, ok := res.Content[0].(*mcp.EmbeddedResource)
		if !ok || string(er.Resource.Blob) != "\xff\xfe\x00\x01" || er.Resource.MIMEType != "application/octet-stream" {
			t.Fatalf("content = %#v, want the bytes as a blob", res.Content[0])
		}
	})
}

func TestUsageReachesClients(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	h.deploy(t, "echo", "echo.wasm")
	cs := h.connect(t, nil)
	instructions := cs.InitializeResult().Instructions
	if !strings.Contains(instructions, "echo: A fixture that echoes") || !strings.Contains(instructions, "{program}_{tool}") {
		t.Errorf("instructions = %q", instructions)
	}
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "berm://echo/usage"})
	if err != nil || len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, "echoes") {
		t.Fatalf("usage resource = %+v, %v", res, err)
	}
	if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "berm://ghost/usage"}); err == nil {
		t.Fatal("usage of an absent program was found")
	}
	list, err := cs.ListResources(context.Background(), nil)
	if err != nil || len(list.Resources) != 1 || list.Resources[0].URI != "berm://echo/usage" {
		t.Fatalf("resources = %+v, %v", list, err)
	}
}

func TestNothingDeployed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	cs := h.connect(t, nil)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 0 {
		t.Fatalf("tools = %+v, %v", tools, err)
	}
	if list, _, _ := h.st.Deployments(); len(list) != 0 {
		t.Fatal("serve deployed something by itself")
	}
}

// TestLiveChanges deploys, replaces and removes programs in the store, as
// another process would, while a client is connected: the served tools
// follow within a second, with notifications/tools/list_changed.
func TestLiveChanges(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	changed := make(chan struct{}, 16)
	cs := h.connect(t, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	waitFor := func(what string, ok func(map[string]bool) bool) {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(time.Second):
			t.Fatalf("%s: no tools/list_changed within a second", what)
		}
		deadline := time.Now().Add(time.Second)
		for {
			tools, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]bool{}
			for _, tool := range tools.Tools {
				names[tool.Name] = true
			}
			if ok(names) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: tools = %v", what, names)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	h.deploy(t, "p", "echo.wasm")
	waitFor("deploy", func(n map[string]bool) bool { return n["p_echo"] })
	res, err := call(t, cs, "p_echo", map[string]any{"v": 1})
	if err != nil || text(t, res) != `{"v":1}` {
		t.Fatalf("p_echo: %v %v", res, err)
	}

	h.deploy(t, "p", "core.wasm")
	waitFor("replace", func(n map[string]bool) bool { return n["p_fail"] && n["p_echo"] })
	res, err = call(t, cs, "p_fail", nil)
	if err != nil || !res.IsError {
		t.Fatalf("p_fail after replace: %v %v", res, err)
	}

	h.deploy(t, "p", "echo.wasm")
	waitFor("replace back", func(n map[string]bool) bool { return !n["p_fail"] && n["p_echo"] })

	if err := h.st.Remove("p", false); err != nil {
		t.Fatal(err)
	}
	waitFor("remove", func(n map[string]bool) bool { return !n["p_echo"] })
	if _, err := call(t, cs, "p_echo", nil); err == nil {
		t.Fatal("a removed program's tool answered")
	}
}

// TestUnservableDeployment writes a deployment the SDK cannot serve straight
// into the store (Deploy refuses it): the server logs it, keeps serving the
// rest, and never goes down.
func TestUnservableDeployment(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	h.deploy(t, "echo", "echo.wasm")
	image := unservableImage(t)
	m, err := manifest.Read(image)
	if err != nil {
		t.Fatal(err)
	}
	if err := mcpserve.Check("bad", m, mcpserve.Underscore); !errors.Is(err, mcpserve.ErrUnservable) {
		t.Fatalf("Check = %v, want ErrUnservable", err)
	}
	if _, err := h.svc.Deploy(context.Background(), "bad", image, "", nil); !errors.Is(err, mcpserve.ErrUnservable) {
		t.Fatalf("Deploy = %v, want ErrUnservable", err)
	}
	digest, _ := h.st.PutImage(image)
	if err := h.st.Deploy(store.Deployment{Name: "bad", Digest: digest}); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	h.build(&mcpserve.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	cs := h.connect(t, nil)
	for range 3 {
		if err := h.svc.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// Refused once, not at every poll.
	if n := strings.Count(logs.String(), "msg=load"); n != 1 {
		t.Errorf("the unservable deployment was logged %d times, want once:\n%s", n, logs.String())
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "echo_echo" {
		t.Fatalf("tools = %+v, %v", tools, err)
	}
}

// unservableImage is the echo module with a tool whose schema carries an
// x-mcp-header annotation on an object property, which the SDK refuses.
func unservableImage(t *testing.T) []byte {
	t.Helper()
	image, err := os.ReadFile("../testdata/echo.wasm")
	if err != nil {
		t.Fatal(err)
	}
	payload := `{"abi_version":0,"tools":[{"name":"echo","parameters":{"type":"object",
		"properties":{"h":{"type":"object","x-mcp-header":"X-Thing"}}}}]}`
	out, err := manifest.Attach(image, []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	// 64 at once: 8 run, and the rest wait (MaxWaiting is 32 by default).
	h := newHarness(t, runtime.Limits{}, &mcpserve.Options{MaxConcurrent: 8, MaxWaiting: 56})
	h.deploy(t, "core", "core.wasm")
	cs := h.connect(t, nil)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tool, args, want := "core_echo", map[string]any{"i": i}, fmt.Sprintf(`{"i":%d}`, i)
			if i%4 == 0 {
				tool, args, want = "core_busy", nil, "ok"
			}
			res, err := call(t, cs, tool, args)
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			if got := text(t, res); got != want {
				t.Errorf("call %d: %q, want %q", i, got, want)
			}
		}()
	}
	wg.Wait()
}

func TestLogsReachClients(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	h.deploy(t, "core", "core.wasm")
	logs := make(chan string, 8)
	cs := h.connect(t, &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
		logs <- fmt.Sprintf("%s: %v", req.Params.Logger, req.Params.Data)
	}})
	// Before logging/setLevel, nothing is sent.
	if _, err := call(t, cs, "core_log", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-logs:
		t.Fatalf("a log message before setLevel: %s", l)
	case <-time.After(100 * time.Millisecond):
	}
	if err := cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, cs, "core_log", nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"core: hello from core", "core: second line"} {
		select {
		case got := <-logs:
			if got != want {
				t.Errorf("log = %q, want %q", got, want)
			}
		case <-time.After(time.Second):
			t.Fatalf("no log message %q", want)
		}
	}
}

// lockedBuffer is a log sink that tests read while the server writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDrain: once draining, calls in flight finish and new ones are refused.
func TestDrain(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	h := newHarness(t, runtime.Limits{}, &mcpserve.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	h.deploy(t, "core", "core.wasm")
	cs := h.connect(t, nil)
	done := make(chan error, 1)
	go func() {
		res, err := call(t, cs, "core_busy", nil)
		if err == nil && text(t, res) != "ok" {
			err = fmt.Errorf("busy returned %q", text(t, res))
		}
		done <- err
	}()
	inFlight := time.Now().Add(10 * time.Second)
	for h.srv.InFlight() == 0 {
		select {
		case err := <-done:
			t.Fatalf("core_busy ended before it was seen in flight: %v", err)
		default:
		}
		if time.Now().After(inFlight) {
			t.Fatal("core_busy not in flight after 10s")
		}
		time.Sleep(time.Millisecond)
	}
	if err := h.srv.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The call's record is logged before its handler returns, so Drain must
	// not have returned before it.
	if !strings.Contains(logs.String(), "tool=busy") || !strings.Contains(logs.String(), "outcome=result") {
		t.Fatalf("Drain returned before the call in flight finished; log:\n%s", logs.String())
	}
	if err := <-done; err != nil {
		t.Fatalf("the call in flight: %v", err)
	}
	_, err := call(t, cs, "core_echo", nil)
	if rpcCode(err) != mcpserve.CodeBusy {
		t.Fatalf("a call after Drain: %v, want CodeBusy", err)
	}
}

func TestDottedNames(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, &mcpserve.Options{Naming: mcpserve.Dotted})
	h.deploy(t, "echo", "echo.wasm")
	cs := h.connect(t, nil)
	res, err := call(t, cs, "echo.echo", map[string]any{"a": 1})
	if err != nil || text(t, res) != `{"a":1}` {
		t.Fatalf("echo.echo: %+v, %v", res, err)
	}
}

// TestLogFatalLineWarns: a program's line that says it is dying (a Go
// panic, which its trap's message quotes) is logged at warn, its others at
// info.
func TestLogFatalLineWarns(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	h := newHarness(t, runtime.Limits{}, &mcpserve.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := context.Background()
	h.srv.Log(ctx, "p", "t", []byte("panic: assignment to entry in nil map"))
	h.srv.Log(ctx, "p", "t", []byte("an ordinary line"))
	out := logs.String()
	if !strings.Contains(out, `level=WARN msg=log program=p tool=t line="panic: assignment to entry in nil map"`) ||
		!strings.Contains(out, `level=INFO msg=log program=p tool=t line="an ordinary line"`) {
		t.Fatalf("log:\n%s", out)
	}
}
