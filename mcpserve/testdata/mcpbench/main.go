// Command mcpbench measures berm serve against a reference MCP server, all
// driven by one Go SDK client: the tools/call round trip of an echo tool over
// stdio and streamable HTTP (p50 and p99, each the median over rounds), and
// the time from starting berm serve --stdio to the answer of its first
// tools/list. bench.sh beside it builds berm, prepares the roots and runs it:
//
//	bash mcpserve/testdata/bench.sh
//
// Targets (issue 3): berm's p50 no worse than the reference's, at most 150 µs
// over stdio; tools/list within 100 ms of the start with 20 programs deployed.
//
// Besides berm and the reference (server-everything, TypeScript), it measures
// a floor: a Go SDK server whose tool echoes in Go, which is mcpbench itself
// run with -floor. What berm adds to the floor is what berm costs; the rest is
// the SDK's and the operating system's. The CPU columns are the server's and
// this client's CPU time per call (Linux only), which a busy machine disturbs
// less than the latencies.
//
// The ratios are to the reference on the same transport; "round p50/ref" is
// the median of each round's ratio, steadier on a busy machine. -interleave
// calls the servers in turn instead of one server's calls in a row, so that
// the machine's other work falls on all alike and each call finds its server
// idle, as a model's calls do. -compare and -compare-floor add builds to
// measure side by side (before and after a change, or against a changed
// SDK), e.g. over stdio only:
//
//	bash mcpserve/testdata/bench.sh -stdio-only -interleave -compare before=/tmp/berm-old
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// protocol is pinned so that the Go client speaks the same version to berm,
// the floor and the TypeScript reference.
const protocol = "2025-11-25"

type config struct {
	berm, root, root20, everything string
	bermEnv                        []string
	calls, warmup, rounds, starts  int
	cold, stdioOnly, interleave    bool
	// compare are more berm binaries measured over stdio beside the first,
	// as label=path: a build before a change, say.
	compare, compareFloor []string
}

func main() {
	var c config
	floor := flag.String("floor", "", "serve the floor's echo_echo over `stdio` or http (what the bench runs itself as)")
	flag.StringVar(&c.berm, "berm", "", "the berm binary")
	flag.StringVar(&c.root, "root", "", "a berm root with testdata/echo.wasm deployed as echo")
	flag.StringVar(&c.root20, "root20", "", "a berm root with 20 programs deployed, for the start-up measure")
	flag.StringVar(&c.everything, "everything", "", "the mcp-server-everything binary (the reference)")
	flag.IntVar(&c.calls, "n", 2000, "measured calls per server, transport and round")
	flag.IntVar(&c.warmup, "warmup", 200, "calls before measuring")
	flag.IntVar(&c.rounds, "rounds", 5, "rounds; the figures are the median over them")
	flag.IntVar(&c.starts, "starts", 11, "starts of berm serve --stdio for the start-up measure")
	flag.BoolVar(&c.cold, "cold", true, "also measure starts with the compile cache emptied")
	flag.BoolVar(&c.stdioOnly, "stdio-only", false, "measure the calls over stdio only, and no start-up")
	flag.BoolVar(&c.interleave, "interleave", false, "call the servers in turn, one call each, instead of one server's calls in a row")
	compareFloor := flag.String("compare-floor", "", "comma-separated `label=path`s of more mcpbench binaries to measure as the floor over stdio (built against a changed SDK, say)")
	compare := flag.String("compare", "", "comma-separated `label=path`s of more berm binaries to measure over stdio, as before=/tmp/berm-old;\na path may be followed by its own KEY=VALUEs: 'gc=/tmp/berm GOGC=400'")
	bermEnv := flag.String("berm-env", "", "space-separated `KEY=VALUE`s for the berm processes only, as GOGC=400")
	flag.Parse()
	c.bermEnv = strings.Fields(*bermEnv)
	if *compare != "" {
		c.compare = strings.Split(*compare, ",")
	}
	if *compareFloor != "" {
		c.compareFloor = strings.Split(*compareFloor, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case *floor != "":
		err = serveFloor(ctx, *floor)
	case c.berm == "" || c.root == "" || c.root20 == "" || c.everything == "":
		fmt.Fprintln(os.Stderr, "mcpbench: -berm, -root, -root20 and -everything are required (bench.sh gives them)")
		os.Exit(2)
	default:
		err = run(ctx, c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpbench:", err)
		os.Exit(1)
	}
}

// target is one server on one transport, and the call that echoes on it.
type target struct {
	server, transport string
	// connect returns a session and the server's process.
	connect func(ctx context.Context) (*mcp.ClientSession, *os.Process, error)
	tool    string
	want    string // the text the call must answer
}

// sample is what one round measured of one target.
type sample struct {
	p50, p99             time.Duration
	serverCPU, clientCPU time.Duration // per call; 0 when unknown
}

func run(ctx context.Context, c config) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	const bermWant, refWant = `{"message":"hi"}`, "Echo: hi"
	bermStdio := func(bin string, env ...string) func(context.Context) (*mcp.ClientSession, *os.Process, error) {
		return stdio(func() *exec.Cmd {
			cmd := bermCmd(c, c.root, "serve", "--stdio")
			cmd.Path, cmd.Args[0] = bin, bin
			cmd.Env = append(cmd.Env, env...)
			return cmd
		})
	}
	targets := []target{
		{"berm", "stdio", bermStdio(c.berm), "echo_echo", bermWant},
		{"reference", "stdio", stdio(func() *exec.Cmd { return exec.Command(c.everything, "stdio") }), "echo", refWant},
		{"go-sdk floor", "stdio", stdio(func() *exec.Cmd { return exec.Command(self, "-floor", "stdio") }), "echo_echo", bermWant},
	}
	for _, cmp := range c.compare {
		label, spec, ok := strings.Cut(cmp, "=")
		f := strings.Fields(spec)
		if !ok || len(f) == 0 {
			return fmt.Errorf("-compare %q: want label=path", cmp)
		}
		targets = append(targets, target{label, "stdio", bermStdio(f[0], f[1:]...), "echo_echo", bermWant})
	}
	for _, cmp := range c.compareFloor {
		label, bin, ok := strings.Cut(cmp, "=")
		if !ok {
			return fmt.Errorf("-compare-floor %q: want label=path", cmp)
		}
		targets = append(targets, target{label, "stdio", stdio(func() *exec.Cmd { return exec.Command(bin, "-floor", "stdio") }), "echo_echo", bermWant})
	}
	if !c.stdioOnly {
		bermURL, bermProc, err := startHTTP(bermCmd(c, c.root, "serve", "--addr", "127.0.0.1:0"))
		if err != nil {
			return fmt.Errorf("berm serve: %w", err)
		}
		defer stopProcess(bermProc)
		refURL, refProc, err := startEverythingHTTP(c.everything)
		if err != nil {
			return err
		}
		defer stopProcess(refProc)
		floorURL, floorProc, err := startHTTP(exec.Command(self, "-floor", "http"))
		if err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		defer stopProcess(floorProc)
		targets = append(targets,
			target{"berm", "http", streamable(bermURL, bermProc), "echo_echo", bermWant},
			target{"reference", "http", streamable(refURL, refProc), "echo", refWant},
			target{"go-sdk floor", "http", streamable(floorURL, floorProc), "echo_echo", bermWant},
		)
	}
	fmt.Printf("tools/call round trip of an echo: %d calls after %d warm-up, median of %d rounds, one Go SDK client (protocol %s)\n",
		c.calls, c.warmup, c.rounds, protocol)
	samples := make([][]sample, len(targets))
	for r := range c.rounds {
		line := []string{fmt.Sprintf("round %d p50 µs:", r+1)}
		var round []sample
		if c.interleave {
			if round, err = measureInterleaved(ctx, targets, c.warmup, c.calls); err != nil {
				return err
			}
		} else {
			for _, tg := range targets {
				s, err := measure(ctx, tg, c.warmup, c.calls)
				if err != nil {
					return fmt.Errorf("%s over %s: %w", tg.server, tg.transport, err)
				}
				round = append(round, s)
			}
		}
		for i, tg := range targets {
			samples[i] = append(samples[i], round[i])
			line = append(line, fmt.Sprintf("%s/%s %s", tg.server, tg.transport, us(round[i].p50)))
		}
		fmt.Fprintln(os.Stderr, strings.Join(line, "  "))
	}

	med := func(i int, f func(sample) time.Duration) time.Duration {
		var ds []time.Duration
		for _, s := range samples[i] {
			ds = append(ds, f(s))
		}
		return median(ds)
	}
	p50 := func(s sample) time.Duration { return s.p50 }
	p99 := func(s sample) time.Duration { return s.p99 }
	// The ratios are each server's over the reference's on the same
	// transport; the per-round ratio's median is steadier on a busy machine
	// than the ratio of medians.
	roundRatio := func(i, ref int) float64 {
		var rs []float64
		for r := range samples[i] {
			rs = append(rs, ratio(samples[i][r].p50, samples[ref][r].p50))
		}
		slices.Sort(rs)
		return rs[(len(rs)-1)/2]
	}
	misses := 0
	for _, transport := range []string{"stdio", "http"} {
		ref := slices.IndexFunc(targets, func(t target) bool { return t.transport == transport && t.server == "reference" })
		if ref < 0 {
			continue
		}
		fmt.Printf("\n%-10s %-13s %8s %8s %14s %14s %9s %9s %12s\n", "transport", "server", "p50 µs", "p99 µs", "server CPU µs", "client CPU µs",
			"p50/ref", "p99/ref", "round p50/ref")
		for i, tg := range targets {
			if tg.transport != transport {
				continue
			}
			fmt.Printf("%-10s %-13s %8s %8s %14s %14s %9.2f %9.2f %12.2f\n", tg.transport, tg.server, us(med(i, p50)), us(med(i, p99)),
				cpu(med(i, func(s sample) time.Duration { return s.serverCPU })),
				cpu(med(i, func(s sample) time.Duration { return s.clientCPU })),
				ratio(med(i, p50), med(ref, p50)), ratio(med(i, p99), med(ref, p99)), roundRatio(i, ref))
		}
		b, r := med(0, p50), med(ref, p50)
		if transport == "http" {
			b = med(slices.IndexFunc(targets, func(t target) bool { return t.transport == "http" && t.server == "berm" }), p50)
		}
		fmt.Println()
		misses += check(transport+": berm p50 no worse than the reference's", b <= r, us(b)+" vs "+us(r)+" µs")
		if transport == "stdio" {
			misses += check("stdio: berm p50 at most 150 µs", b <= 150*time.Microsecond, us(b)+" µs")
		}
	}
	if c.stdioOnly {
		if misses > 0 {
			return fmt.Errorf("%d target(s) missed", misses)
		}
		return nil
	}

	fmt.Printf("\nberm serve --stdio with 20 programs deployed, from the start to the answer of the first tools/list:\n")
	warmInit, warm, err := startups(ctx, c, false)
	if err != nil {
		return err
	}
	report("warm cache", warmInit, warm)
	if c.cold {
		coldInit, cold, err := startups(ctx, c, true)
		if err != nil {
			return err
		}
		report("cold cache", coldInit, cold)
	}
	misses += check("tools/list within 100 ms of the start (warm cache)", median(warm) <= 100*time.Millisecond, ms(median(warm))+" ms")
	if misses > 0 {
		return fmt.Errorf("%d target(s) missed", misses)
	}
	return nil
}

// measure connects, warms up, and times calls one after another.
func measure(ctx context.Context, tg target, warmup, n int) (sample, error) {
	cs, proc, err := tg.connect(ctx)
	if err != nil {
		return sample{}, fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: tg.tool, Arguments: map[string]any{"message": "hi"}}
	for range warmup {
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			return sample{}, err
		}
		if got := text(res); res.IsError || got != tg.want {
			return sample{}, fmt.Errorf("%s answered %q (isError %v), want %q", tg.tool, got, res.IsError, tg.want)
		}
	}
	server0, client0 := cpuTime(proc.Pid), cpuTime(os.Getpid())
	lat := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if _, err := cs.CallTool(ctx, params); err != nil {
			return sample{}, err
		}
		lat = append(lat, time.Since(start))
	}
	server1, client1 := cpuTime(proc.Pid), cpuTime(os.Getpid())
	slices.Sort(lat)
	s := sample{p50: percentile(lat, 50), p99: percentile(lat, 99)}
	if server0 >= 0 && server1 >= 0 {
		s.serverCPU = (server1 - server0) / time.Duration(n)
	}
	if client0 >= 0 && client1 >= 0 {
		s.clientCPU = (client1 - client0) / time.Duration(n)
	}
	return s, nil
}

// measureInterleaved connects to every target, warms each up, then times
// calls to them in turn, one each, the first of a turn rotating: whatever
// else the machine does falls on all of them alike. Each server waits idle
// while the others answer, as a server does between a model's calls, so its
// threads are asleep when a call comes. The client's CPU time is not told
// apart per target.
func measureInterleaved(ctx context.Context, targets []target, warmup, n int) ([]sample, error) {
	sessions := make([]*mcp.ClientSession, len(targets))
	procs := make([]*os.Process, len(targets))
	params := make([]*mcp.CallToolParams, len(targets))
	for i, tg := range targets {
		cs, proc, err := tg.connect(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s over %s: connect: %w", tg.server, tg.transport, err)
		}
		defer cs.Close()
		sessions[i], procs[i] = cs, proc
		params[i] = &mcp.CallToolParams{Name: tg.tool, Arguments: map[string]any{"message": "hi"}}
		for range warmup {
			res, err := cs.CallTool(ctx, params[i])
			if err != nil {
				return nil, fmt.Errorf("%s over %s: %w", tg.server, tg.transport, err)
			}
			if got := text(res); res.IsError || got != tg.want {
				return nil, fmt.Errorf("%s answered %q (isError %v), want %q", tg.tool, got, res.IsError, tg.want)
			}
		}
	}
	cpu0 := make([]time.Duration, len(targets))
	for i := range targets {
		cpu0[i] = cpuTime(procs[i].Pid)
	}
	lat := make([][]time.Duration, len(targets))
	for k := range n {
		for j := range targets {
			i := (k + j) % len(targets)
			start := time.Now()
			if _, err := sessions[i].CallTool(ctx, params[i]); err != nil {
				return nil, fmt.Errorf("%s over %s: %w", targets[i].server, targets[i].transport, err)
			}
			lat[i] = append(lat[i], time.Since(start))
		}
	}
	out := make([]sample, len(targets))
	for i := range targets {
		slices.Sort(lat[i])
		out[i] = sample{p50: percentile(lat[i], 50), p99: percentile(lat[i], 99)}
		// Servers over HTTP share a process across targets only if
		// started so; each here has its own.
		if cpu1 := cpuTime(procs[i].Pid); cpu0[i] >= 0 && cpu1 >= 0 {
			out[i].serverCPU = (cpu1 - cpu0[i]) / time.Duration(n)
		}
	}
	return out, nil
}

// startups times starts of berm serve --stdio on root20, each to the answer
// of its initialize and of its first tools/list; with cold, the compile cache
// is emptied first.
func startups(ctx context.Context, c config, cold bool) (initialized, listed []time.Duration, err error) {
	for range c.starts {
		if cold {
			if err := os.RemoveAll(filepath.Join(c.root20, "cache")); err != nil {
				return nil, nil, err
			}
		}
		cmd := bermCmd(c, c.root20, "serve", "--stdio")
		client := mcp.NewClient(&mcp.Implementation{Name: "mcpbench", Version: "0"}, nil)
		start := time.Now()
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
		if err != nil {
			return nil, nil, err
		}
		i := time.Since(start)
		res, err := cs.ListTools(ctx, nil)
		l := time.Since(start)
		cs.Close()
		if err != nil {
			return nil, nil, err
		}
		if len(res.Tools) != 20 {
			return nil, nil, fmt.Errorf("tools/list on the root of 20 programs listed %d tools", len(res.Tools))
		}
		initialized, listed = append(initialized, i), append(listed, l)
	}
	return initialized, listed, nil
}

func report(label string, initialized, listed []time.Duration) {
	s := slices.Sorted(slices.Values(listed))
	fmt.Printf("  %-10s tools/list answered at %s ms in the median (min %s, max %s; initialize at %s) over %d starts\n",
		label, ms(median(listed)), ms(s[0]), ms(s[len(s)-1]), ms(median(initialized)), len(listed))
}

func check(what string, ok bool, figure string) int {
	if ok {
		fmt.Printf("target met:    %s (%s)\n", what, figure)
		return 0
	}
	fmt.Printf("target MISSED: %s (%s)\n", what, figure)
	return 1
}

func stdio(cmd func() *exec.Cmd) func(context.Context) (*mcp.ClientSession, *os.Process, error) {
	return func(ctx context.Context) (*mcp.ClientSession, *os.Process, error) {
		c := cmd()
		client := mcp.NewClient(&mcp.Implementation{Name: "mcpbench", Version: "0"}, nil)
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: c}, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
		if err != nil {
			return nil, nil, err
		}
		return cs, c.Process, nil
	}
}

func streamable(url string, proc *os.Process) func(context.Context) (*mcp.ClientSession, *os.Process, error) {
	return func(ctx context.Context) (*mcp.ClientSession, *os.Process, error) {
		client := mcp.NewClient(&mcp.Implementation{Name: "mcpbench", Version: "0"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
		return cs, proc, err
	}
}

func bermCmd(c config, root string, args ...string) *exec.Cmd {
	cmd := exec.Command(c.berm, args...)
	cmd.Env = append(os.Environ(), "BERM_ROOT="+root, "BERM_SERVER=", "BERM_TOKEN=")
	cmd.Env = append(cmd.Env, c.bermEnv...)
	return cmd
}

// startHTTP starts a server that logs "msg=listen url=..." on stderr, as
// berm serve does, and returns that URL.
func startHTTP(cmd *exec.Cmd) (string, *os.Process, error) {
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if line := sc.Text(); strings.Contains(line, "msg=listen ") {
				for _, f := range strings.Fields(line) {
					if u, ok := strings.CutPrefix(f, "url="); ok {
						urls <- u
					}
				}
			}
		}
		io.Copy(io.Discard, stderr)
		close(urls)
		cmd.Wait()
	}()
	select {
	case u, ok := <-urls:
		if ok {
			return u, cmd.Process, nil
		}
		return "", nil, errors.New("exited before listening")
	case <-time.After(30 * time.Second):
		stopProcess(cmd.Process)
		return "", nil, errors.New("did not listen within 30s")
	}
}

// startEverythingHTTP starts the reference's streamable HTTP server on a free
// port and waits until it accepts connections.
func startEverythingHTTP(bin string) (string, *os.Process, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	go cmd.Wait()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			return "http://" + addr + "/mcp", cmd.Process, nil
		}
	}
	stopProcess(cmd.Process)
	return "", nil, errors.New("the reference server did not listen within 30s")
}

// stopProcess asks a server to stop and gives it a second before killing it.
func stopProcess(p *os.Process) {
	p.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for p.Signal(syscall.Signal(0)) == nil {
			time.Sleep(10 * time.Millisecond)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
		p.Kill()
	}
}

// serveFloor serves a tool named and shaped as berm's echo_echo, answered in
// Go: the same SDK with nothing of berm.
func serveFloor(ctx context.Context, transport string) error {
	s := mcp.NewServer(&mcp.Implementation{Name: "floor", Version: "0"}, nil)
	s.AddTool(&mcp.Tool{
		Name:        "echo_echo",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {"message": {"type": "string"}}}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}},
			StructuredContent: req.Params.Arguments,
		}, nil
	})
	switch transport {
	case "stdio":
		return s.Run(ctx, &mcp.StdioTransport{})
	case "http":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		// Logged as berm serve logs it, for startHTTP to read.
		slog.New(slog.NewTextHandler(os.Stderr, nil)).Info("listen", "url", "http://"+ln.Addr().String()+"/mcp")
		mux := http.NewServeMux()
		mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
		srv := &http.Server{Handler: mux}
		go func() { <-ctx.Done(); srv.Close() }()
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
	return fmt.Errorf("-floor %q: want stdio or http", transport)
}

// cpuTime is a process's user and system CPU time so far, from /proc; -1
// where there is none.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The command name, in parentheses, may hold spaces: count from after it.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return -1
	}
	// utime and stime are fields 14 and 15 of stat(5), in USER_HZ (100 on
	// Linux everywhere).
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		} else {
			j, _ := json.Marshal(c)
			b.Write(j)
		}
	}
	return b.String()
}

// percentile is the p-th percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return sorted[max(i-1, 0)]
}

func median(ds []time.Duration) time.Duration {
	return percentile(slices.Sorted(slices.Values(ds)), 50)
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

func us(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }

func cpu(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return us(d)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }
