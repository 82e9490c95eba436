// Command soak drives the real berm serve, over stdio and over streamable
// HTTP on loopback, with many concurrent MCP clients (the official Go SDK's)
// calling well-behaved and misbehaving programs, checks that every reply is
// the one its tool must give, and prints what it measured: calls per second,
// latency, replies by kind, the server's peak memory and the goroutines it
// holds at the end. It is a benchmark, not a test: `make soak` runs it,
// `make test` does not.
//
//	go run ./testdata/soak                    # 64 clients x 10,000 calls, each transport
//	go run ./testdata/soak -calls 500         # a shorter run
//	go run ./testdata/soak -transport http -clients 16
//
// Over stdio, one berm serve --stdio process takes the calls of all clients,
// each a goroutine sharing its one session (an agent's parallel tool calls);
// over HTTP, one berm serve takes a session per client. It exits 1 when any
// reply was not what its tool gives, or a server could not be measured.
// See README.md beside it for what the programs do.
package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The protocol version the clients speak.
const protocol = "2025-11-25"

// berm serve's JSON-RPC error codes (mcpserve), and the SDK's for unknown tools.
const (
	codeInvalidParams = -32602
	codeTrap          = -32010
	codeDeadline      = -32011
	codeLimit         = -32012
)

type config struct {
	berm      string
	clients   int
	calls     int
	transport string
	timeout   time.Duration
	maxTime   time.Duration
	callLimit time.Duration
	seed      uint64
	special   int
}

func main() {
	var c config
	flag.StringVar(&c.berm, "berm", "", "the berm binary (default: go build . into a temporary directory)")
	flag.IntVar(&c.clients, "clients", 64, "concurrent clients")
	flag.IntVar(&c.calls, "calls", 10000, "calls per client and transport")
	flag.StringVar(&c.transport, "transport", "both", "stdio, http or both")
	flag.DurationVar(&c.timeout, "timeout", 3*time.Second, "berm serve --timeout: the deadline core_loop meets (core_busy, ~100 ms of work, must not)")
	flag.DurationVar(&c.maxTime, "max-time", 10*time.Minute, "stop issuing calls on a transport after this long")
	flag.DurationVar(&c.callLimit, "call-limit", 60*time.Second, "a call with no reply after this long counts as timed out")
	flag.Uint64Var(&c.seed, "seed", 0, "seed of the call mix (default: the time)")
	flag.IntVar(&c.special, "special", 4, "calls of each costly tool per transport: core_loop (a deadline) and core_big_result (17 MiB, over the limit)")
	flag.Parse()
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	if c.clients < 1 || c.calls < 1 {
		fail(errors.New("-clients and -calls must be 1 or more"))
	}
	var transports []string
	switch c.transport {
	case "both":
		transports = []string{"stdio", "http"}
	case "stdio", "http":
		transports = []string{c.transport}
	default:
		fail(fmt.Errorf("-transport %q: want stdio, http or both", c.transport))
	}

	work, err := os.MkdirTemp("", "berm-soak-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(work)
	if c.berm == "" {
		c.berm = filepath.Join(work, "berm")
		fmt.Printf("build berm\n")
		if out, err := exec.Command("go", "build", "-o", c.berm, ".").CombinedOutput(); err != nil {
			fail(fmt.Errorf("go build: %v\n%s", err, out))
		}
	}
	root := filepath.Join(work, "root")
	for _, p := range []struct{ name, file string }{
		{"echo", "testdata/echo.wasm"}, {"core", "testdata/core.wasm"},
		{"kv", "testdata/kv.wasm"}, {"nest", "testdata/nest.wasm"},
	} {
		cmd := bermCommand(c.berm, root, "deploy", p.name, p.file)
		if out, err := cmd.CombinedOutput(); err != nil {
			fail(fmt.Errorf("berm deploy %s %s: %v\n%s", p.name, p.file, err, out))
		}
	}
	fmt.Printf("soak: %d clients x %d calls per transport, seed %d, berm serve --timeout %v\n", c.clients, c.calls, c.seed, c.timeout)
	ok := true
	for _, tr := range transports {
		if !soak(c, tr, root) {
			ok = false
		}
	}
	if !ok {
		os.Exit(1)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "soak:", err)
	os.Exit(2)
}

func bermCommand(bin, root string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, append([]string{"--root", root}, args...)...)
	// GOTRACEBACK=all: the SIGQUIT that ends a server dumps every goroutine,
	// which is how they are counted.
	cmd.Env = append(os.Environ(), "BERM_ROOT="+root, "BERM_SERVER=", "BERM_TOKEN=", "GOTRACEBACK=all")
	return cmd
}

// A tool is one kind of call and the reply it must get.
type tool struct {
	name   string // the MCP tool
	label  string // how the figures name it, when not by name
	weight int    // its share of the ordinary calls
	args   func(client, i int) any
	// check says what kind of reply it was and whether it is the one the
	// tool must give.
	check func(args any, res *mcp.CallToolResult, err error) (kind string, ok bool)
}

var bigMessage = strings.Repeat("0123456789abcdef", 16<<10) // 256 KiB

func tools() []tool {
	echo := func(args any, res *mcp.CallToolResult, err error) (string, bool) {
		kind, text := outcome(res, err)
		if kind != "result" {
			return kind, false
		}
		return kind, jsonEqual(text, args)
	}
	toolError := func(want string) func(any, *mcp.CallToolResult, error) (string, bool) {
		return func(_ any, res *mcp.CallToolResult, err error) (string, bool) {
			kind, text := outcome(res, err)
			return kind, kind == "tool error" && strings.Contains(text, want)
		}
	}
	rpcError := func(code int64) func(any, *mcp.CallToolResult, error) (string, bool) {
		return func(_ any, res *mcp.CallToolResult, err error) (string, bool) {
			kind, _ := outcome(res, err)
			return kind, kind == rpcKind(code)
		}
	}
	text := func(want string) func(any, *mcp.CallToolResult, error) (string, bool) {
		return func(_ any, res *mcp.CallToolResult, err error) (string, bool) {
			kind, text := outcome(res, err)
			return kind, kind == "result" && text == want
		}
	}
	noArgs := func(int, int) any { return map[string]any{} }
	return []tool{
		{name: "echo_echo", weight: 300, check: echo,
			args: func(c, i int) any { return map[string]any{"message": fmt.Sprintf("client %d call %d", c, i)} }},
		{name: "echo_echo", label: "echo_echo 256KiB", weight: 4, check: echo, // a large result
			args: func(c, i int) any { return map[string]any{"message": bigMessage} }},
		{name: "kv_set", weight: 60, check: text("set"),
			args: func(c, i int) any { return map[string]any{"c": c, "i": i} }},
		{name: "kv_get", weight: 60, args: noArgs,
			check: func(_ any, res *mcp.CallToolResult, err error) (string, bool) {
				kind, text := outcome(res, err)
				if kind != "result" {
					return kind, false
				}
				// Another client's value, or none yet.
				var v struct{ C, I *int }
				return kind, text == "absent" || (json.Unmarshal([]byte(text), &v) == nil && v.C != nil && v.I != nil)
			}},
		{name: "nest_call_echo", weight: 60, args: noArgs, check: text(`{"via":"nest"}`)},
		{name: "core_fail", weight: 40, args: noArgs, check: toolError("it failed on purpose")},
		{name: "core_strict", weight: 20, check: toolError(""), // arguments refused
			args: func(int, int) any { return map[string]any{"n": "not an integer"} }},
		{name: "core_trap", weight: 30, args: noArgs, check: rpcError(codeTrap)},
		{name: "core_unknown_syscall", weight: 10, args: noArgs, check: rpcError(codeTrap)},
		{name: "ghost_tool", weight: 5, args: noArgs, check: rpcError(codeInvalidParams)},
		{name: "core_busy", weight: 2, args: noArgs, check: text("ok")}, // ~100 ms of work
	}
}

// special are the costly calls, a fixed number each per transport.
func special() []tool {
	return []tool{
		{name: "core_loop", args: func(int, int) any { return map[string]any{} }, check: func(_ any, res *mcp.CallToolResult, err error) (string, bool) {
			kind, _ := outcome(res, err)
			return kind, kind == rpcKind(codeDeadline)
		}},
		{name: "core_big_result", args: func(int, int) any { return map[string]any{} }, check: func(_ any, res *mcp.CallToolResult, err error) (string, bool) {
			kind, _ := outcome(res, err)
			return kind, kind == rpcKind(codeLimit)
		}},
	}
}

// outcome classifies a reply: "result" or "tool error" with its text, an
// "rpc CODE" error, or what failed on the way.
func outcome(res *mcp.CallToolResult, err error) (string, string) {
	if err != nil {
		var we *jsonrpc.Error
		switch {
		case errors.As(err, &we):
			return rpcKind(we.Code), we.Message
		case errors.Is(err, context.DeadlineExceeded):
			return "client timeout", err.Error()
		default:
			return "transport error", err.Error()
		}
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return "tool error", text.String()
	}
	return "result", text.String()
}

func rpcKind(code int64) string {
	name := map[int64]string{codeInvalidParams: "invalid params", codeTrap: "trap", codeDeadline: "deadline", codeLimit: "limit"}[code]
	if name == "" {
		name = "other"
	}
	return fmt.Sprintf("rpc %d (%s)", code, name)
}

func jsonEqual(text string, want any) bool {
	var got, w any
	b, _ := json.Marshal(want)
	if json.Unmarshal([]byte(text), &got) != nil || json.Unmarshal(b, &w) != nil {
		return false
	}
	return reflect.DeepEqual(got, w)
}

// server is a running berm serve.
type server struct {
	cmd     *exec.Cmd
	stderr  *lockedBuffer
	connect func(ctx context.Context) (*mcp.ClientSession, error)
	close   func()
}

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

var listenURL = regexp.MustCompile(`msg=listen url=(\S+)`)

// startServer starts berm serve over transport. Over stdio, every client
// shares the one session connect returns.
func startServer(c config, transport, root string) (*server, error) {
	s := &server{stderr: &lockedBuffer{}}
	flags := []string{"serve", "--timeout", c.timeout.String()}
	client := mcp.NewClient(&mcp.Implementation{Name: "berm-soak", Version: "0"}, nil)
	if transport == "stdio" {
		s.cmd = bermCommand(c.berm, root, append(flags, "--stdio")...)
		s.cmd.Stderr = s.stderr
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: s.cmd}, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
		if err != nil {
			return nil, fmt.Errorf("connect over stdio: %v\n%s", err, s.stderr)
		}
		s.connect = func(context.Context) (*mcp.ClientSession, error) { return cs, nil }
		s.close = func() { cs.Close() }
		return s, nil
	}
	s.cmd = bermCommand(c.berm, root, append(flags, "--addr", "127.0.0.1:0")...)
	pipe, err := s.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			s.stderr.Write(append(sc.Bytes(), '\n'))
			if m := listenURL.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
		io.Copy(s.stderr, pipe)
		close(urls)
	}()
	var endpoint string
	select {
	case u, ok := <-urls:
		if !ok {
			s.cmd.Wait()
			return nil, fmt.Errorf("berm serve exited before it listened:\n%s", s.stderr)
		}
		endpoint = strings.TrimSuffix(u, "/mcp") + "/mcp"
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		s.cmd.Wait()
		return nil, errors.New("berm serve did not listen within 30s")
	}
	httpClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * c.clients, MaxIdleConns: 4 * c.clients}}
	var mu sync.Mutex
	var sessions []*mcp.ClientSession
	s.connect = func(ctx context.Context) (*mcp.ClientSession, error) {
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: httpClient}, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
		if err == nil {
			mu.Lock()
			sessions = append(sessions, cs)
			mu.Unlock()
		}
		return cs, err
	}
	s.close = func() {
		mu.Lock()
		defer mu.Unlock()
		var wg sync.WaitGroup
		for _, cs := range sessions {
			wg.Go(func() { cs.Close() })
		}
		wg.Wait()
		sessions = nil
		httpClient.CloseIdleConnections()
	}
	return s, nil
}

// memory reads the server's peak and current resident memory and threads.
func (s *server) memory() (hwm, rss string, threads string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return "?", "?", "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "VmHWM":
			hwm = humanKB(v)
		case "VmRSS":
			rss = humanKB(v)
		case "Threads":
			threads = v
		}
	}
	return hwm, rss, threads
}

func humanKB(v string) string {
	kb, err := strconv.Atoi(strings.TrimSuffix(v, " kB"))
	if err != nil {
		return v
	}
	return fmt.Sprintf("%.1f MiB", float64(kb)/1024)
}

var goroutineHeader = regexp.MustCompile(`(?m)^goroutine \d+ .*\[`)
var createdBy = regexp.MustCompile(`(?m)^created by (\S+)`)

// goroutines ends the server with SIGQUIT and counts the goroutines its
// dump shows, with the most common places they were started from.
func (s *server) goroutines() (n, sdk int, sites string) {
	s.cmd.Process.Signal(syscall.SIGQUIT)
	done := make(chan struct{})
	go func() {
		s.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
	dump := s.stderr.String()
	if i := strings.Index(dump, "SIGQUIT"); i >= 0 {
		dump = dump[i:]
	}
	starts := goroutineHeader.FindAllStringIndex(dump, -1)
	n, sdk = len(starts), 0
	for i, at := range starts {
		end := len(dump)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		if strings.Contains(dump[at[0]:end], "modelcontextprotocol/go-sdk") {
			sdk++
		}
	}
	by := map[string]int{}
	for _, m := range createdBy.FindAllStringSubmatch(dump, -1) {
		by[m[1]]++
	}
	var top []string
	for site, k := range by {
		top = append(top, fmt.Sprintf("%d by %s", k, site))
	}
	sort.Slice(top, func(i, j int) bool {
		a, _ := strconv.Atoi(strings.Fields(top[i])[0])
		b, _ := strconv.Atoi(strings.Fields(top[j])[0])
		return a > b || (a == b && top[i] < top[j])
	})
	if len(top) > 4 {
		top = top[:4]
	}
	return n, sdk, strings.Join(top, "; ")
}

// record is what one call gave.
type record struct {
	tool    string
	kind    string
	ok      bool
	latency time.Duration
	detail  string
}

func soak(c config, transport, root string) bool {
	fmt.Printf("\n== %s\n", transport)
	s, err := startServer(c, transport, root)
	if err != nil {
		fmt.Println("FAIL:", err)
		return false
	}
	// Every tool is listed, and each program compiled, before the clock starts.
	ctx := context.Background()
	cs, err := s.connect(ctx)
	if err != nil {
		fmt.Println("FAIL: connect:", err)
		return false
	}
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		fmt.Println("FAIL: tools/list:", err)
		return false
	}
	listed := map[string]bool{}
	for _, t := range list.Tools {
		listed[t.Name] = true
	}
	for _, t := range append(tools(), special()...) {
		if !listed[t.name] && t.name != "ghost_tool" {
			fmt.Printf("FAIL: %s is not served\n", t.name)
			return false
		}
	}
	for _, p := range []string{"echo_echo", "core_echo", "kv_now", "nest_echo"} {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: p, Arguments: map[string]any{}}); err != nil {
			fmt.Printf("FAIL: warm-up call of %s: %v\n", p, err)
			return false
		}
	}

	ordinary, costly := tools(), special()
	total := 0
	for _, t := range ordinary {
		total += t.weight
	}
	records := make([][]record, c.clients)
	var issued atomic.Int64
	stopAt := time.Now().Add(c.maxTime)
	start := time.Now()
	var wg sync.WaitGroup
	for client := range c.clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(c.seed, uint64(client)))
			cs, err := s.connect(ctx)
			if err != nil {
				records[client] = append(records[client], record{tool: "connect", kind: "connect error", detail: err.Error()})
				return
			}
			recs := make([]record, 0, c.calls)
			for i := range c.calls {
				if time.Now().After(stopAt) {
					break
				}
				// The costly calls: client k of the first 2*special makes one,
				// half-way through.
				var t tool
				switch {
				case i == c.calls/2 && client < c.special:
					t = costly[0]
				case i == c.calls/2 && client >= c.special && client < 2*c.special:
					t = costly[1]
				default:
					w := rng.IntN(total)
					for _, o := range ordinary {
						if w < o.weight {
							t = o
							break
						}
						w -= o.weight
					}
				}
				args := t.args(client, i)
				callCtx, cancel := context.WithTimeout(ctx, c.callLimit)
				began := time.Now()
				res, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: t.name, Arguments: args})
				latency := time.Since(began)
				cancel()
				issued.Add(1)
				kind, ok := t.check(args, res, err)
				r := record{tool: cmp.Or(t.label, t.name), kind: kind, ok: ok, latency: latency}
				if !ok {
					_, r.detail = outcome(res, err)
					if len(r.detail) > 200 {
						r.detail = r.detail[:200] + "..."
					}
				}
				recs = append(recs, r)
			}
			records[client] = recs
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	hwm, rss, threads := s.memory()
	if transport == "stdio" {
		// The one session stays open: the goroutines are those of a server
		// with one idle client.
	} else {
		s.close()
		time.Sleep(500 * time.Millisecond)
	}
	g := goroutineCount{}
	g.n, g.sdk, g.sites = s.goroutines()
	if transport == "stdio" {
		s.close()
	}
	return report(c, records, elapsed, int(issued.Load()), hwm, rss, threads, g, transport)
}

// goroutineCount is what the server's dump showed: every goroutine, those in
// the MCP SDK (sessions and their streams), and where most were started.
type goroutineCount struct {
	n, sdk int
	sites  string
}

func report(c config, records [][]record, elapsed time.Duration, issued int, hwm, rss, threads string, g goroutineCount, transport string) bool {
	var all []time.Duration
	type toolStats struct {
		lat   []time.Duration
		kinds map[string]int
		bad   int
	}
	byTool := map[string]*toolStats{}
	kinds := map[string]int{}
	var bad []record
	for _, recs := range records {
		for _, r := range recs {
			all = append(all, r.latency)
			ts := byTool[r.tool]
			if ts == nil {
				ts = &toolStats{kinds: map[string]int{}}
				byTool[r.tool] = ts
			}
			ts.lat = append(ts.lat, r.latency)
			ts.kinds[r.kind]++
			kinds[r.kind]++
			if !r.ok {
				ts.bad++
				bad = append(bad, r)
			}
		}
	}
	slices.Sort(all)
	fmt.Printf("%d calls in %v: %.0f calls/s; latency p50 %v, p99 %v, max %v\n",
		len(all), elapsed.Round(time.Millisecond), float64(len(all))/elapsed.Seconds(),
		pct(all, 50), pct(all, 99), pct(all, 100))
	if want := c.clients * c.calls; issued < want {
		fmt.Printf("(stopped by -max-time after %d of %d calls)\n", issued, want)
	}
	fmt.Printf("replies by kind:")
	for _, k := range sortedKeys(kinds) {
		fmt.Printf(" %s %d;", k, kinds[k])
	}
	fmt.Println()
	fmt.Printf("  %-22s %8s %10s %10s  %s\n", "tool", "calls", "p50", "p99", "replies (unexpected)")
	for _, name := range sortedKeys(byTool) {
		ts := byTool[name]
		slices.Sort(ts.lat)
		var ks []string
		for _, k := range sortedKeys(ts.kinds) {
			ks = append(ks, fmt.Sprintf("%s %d", k, ts.kinds[k]))
		}
		fmt.Printf("  %-22s %8d %10v %10v  %s (%d)\n", name, len(ts.lat), pct(ts.lat, 50), pct(ts.lat, 99), strings.Join(ks, ", "), ts.bad)
	}
	fmt.Printf("server: peak RSS (VmHWM) %s, RSS at the end %s, %s threads; at the end (%s) %d goroutines, %d of them in the MCP SDK\n",
		hwm, rss, threads, endState(transport), g.n, g.sdk)
	if g.sites != "" {
		fmt.Printf("  started by: %s\n", g.sites)
	}
	ok := len(bad) == 0 && hwm != "?" && g.n > 0
	if len(bad) > 0 {
		fmt.Printf("UNEXPECTED: %d replies were not what their tool gives; the first:\n", len(bad))
		for _, r := range bad[:min(len(bad), 10)] {
			fmt.Printf("  %s: %s: %s\n", r.tool, r.kind, r.detail)
		}
	}
	return ok
}

func endState(transport string) string {
	if transport == "stdio" {
		return "its one session open and idle"
	}
	return "every session closed"
}

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	i = min(max(i-1, 0), len(sorted)-1)
	return sorted[i].Round(10 * time.Microsecond)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
