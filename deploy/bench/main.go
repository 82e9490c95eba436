package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/deploy/internal/replicas"
)

type config struct {
	berm, nginx, state, testdata string
	clients, rounds, deploys     int
	duration, warmup             time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.berm, "berm", "", "the berm binary")
	flag.StringVar(&c.state, "state", "", "a postgres:// `URL` of an empty database, as a superuser where pg_stat_statements is loaded (bench.sh starts one)")
	flag.StringVar(&c.nginx, "nginx", "/usr/sbin/nginx", "the nginx binary")
	flag.StringVar(&c.testdata, "testdata", "testdata", "the repository's testdata directory (echo.wasm, kv.wasm)")
	flag.IntVar(&c.clients, "clients", 8, "MCP clients calling at once through nginx")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds; each figure is the median over them")
	flag.IntVar(&c.deploys, "deploys", 20, "deploys timed to tools/list_changed")
	flag.DurationVar(&c.duration, "duration", 3*time.Second, "time each measure calls for")
	flag.DurationVar(&c.warmup, "warmup", 500*time.Millisecond, "time each measure calls for before counting")
	flag.Parse()
	if c.berm == "" || c.state == "" {
		fmt.Fprintln(os.Stderr, "bench: -berm and -state are required (bench.sh gives them)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// setup is what one measured configuration is: a balancer and the
// replicas behind it.
type setup struct {
	label    string
	balancer string // http://127.0.0.1:PORT
	replicas []*replicas.Replica
	postgres bool
}

// figures are one round's measures of one setup.
type figures struct {
	echoCPS, getCPS     float64
	echoCPU, getCPU     time.Duration // the replicas' CPU time per call
	echoStmts, getStmts float64       // per call, when counted
	idleRate            float64       // statements a second with no calls, subtracted
	counted             bool
}

func run(ctx context.Context, c config) error {
	work, err := os.MkdirTemp("", "berm-bench-replicas-")
	if err != nil {
		return err
	}
	var procs []interface{ Stop() }
	defer func() {
		for _, p := range slices.Backward(procs) {
			p.Stop()
		}
		os.RemoveAll(work)
	}()
	echoWasm, kvWasm := filepath.Join(c.testdata, "echo.wasm"), filepath.Join(c.testdata, "kv.wasm")

	root := filepath.Join(work, "root")
	for _, args := range [][]string{
		{"deploy", "--root", root, "echo", echoWasm},
		{"deploy", "--root", root, "kv", kvWasm},
		{"deploy", "--state", c.state, "echo", echoWasm},
		{"deploy", "--state", c.state, "kv", kvWasm},
	} {
		if _, err := (replicas.CLI{Bin: c.berm, Root: filepath.Join(work, "cli")}).Run(ctx, args...); err != nil {
			return err
		}
	}

	// Each logs warnings only: at info it would log every call, which is
	// not what is measured.
	start := func(name string, opts replicas.Options) (*replicas.Replica, error) {
		opts.Bin, opts.Quiet = c.berm, true
		r, err := replicas.Start(name, opts)
		if err != nil {
			return nil, err
		}
		procs = append(procs, r)
		return r, r.WaitReady(2, 30*time.Second)
	}
	onRoot, err := start("root", replicas.Options{Root: root})
	if err != nil {
		return err
	}
	var onPG []*replicas.Replica
	for i := range 3 {
		r, err := start(fmt.Sprintf("pg%d", i+1), replicas.Options{State: c.state, Root: filepath.Join(work, fmt.Sprintf("cache%d", i+1))})
		if err != nil {
			return err
		}
		onPG = append(onPG, r)
	}
	setups := []*setup{{label: "root ×1", replicas: []*replicas.Replica{onRoot}}}
	for n := 1; n <= 3; n++ {
		setups = append(setups, &setup{label: fmt.Sprintf("postgres ×%d", n), replicas: onPG[:n], postgres: true})
	}
	for _, s := range setups {
		var upstreams []string
		for _, r := range s.replicas {
			upstreams = append(upstreams, r.Addr())
		}
		lb, err := replicas.StartNginx(ctx, replicas.NginxOptions{
			Bin: c.nginx, Dir: filepath.Join(work, "nginx-"+strings.ReplaceAll(s.label, " ×", "")),
			Upstreams: upstreams, Fast: true,
		})
		if err != nil {
			return err
		}
		procs = append(procs, lb)
		s.balancer = lb.URL
	}
	// One value for every get to read, on each state.
	for _, s := range []*setup{setups[0], setups[1]} {
		if err := callOnce(ctx, s.balancer, "kv_set", map[string]any{"n": 1}); err != nil {
			return fmt.Errorf("%s: kv_set: %w", s.label, err)
		}
	}

	stats, statsErr := openStatements(ctx, c.state)
	if statsErr != nil {
		fmt.Printf("note: statements per call not counted: %v\n", statsErr)
	} else {
		defer stats.Close(context.WithoutCancel(ctx))
	}

	fmt.Printf("berm serve replicas behind nginx (round robin, --stateless), %d MCP clients, %s a measure after %s of warm-up, median of %d rounds, on %d cores\n",
		c.clients, c.duration, c.warmup, c.rounds, runtime.NumCPU())
	results := make(map[*setup][]figures)
	for round := range c.rounds {
		for _, s := range setups {
			var f figures
			f.counted = s.postgres && stats != nil
			if f.counted {
				if f.idleRate, err = stats.idleRate(ctx, time.Second); err != nil {
					return err
				}
			}
			for _, m := range []struct {
				tool  string
				cps   *float64
				cpu   *time.Duration
				stmts *float64
			}{{"echo_echo", &f.echoCPS, &f.echoCPU, &f.echoStmts}, {"kv_get", &f.getCPS, &f.getCPU, &f.getStmts}} {
				// The statements and the CPU are counted over the same
				// window as the calls; the idle replicas' statements are
				// not the calls'.
				var marks []int64
				var cpu []time.Duration
				mark := func() error {
					cpu = append(cpu, cpuTime(s.replicas))
					if !f.counted {
						return nil
					}
					n, err := stats.count(ctx)
					marks = append(marks, n)
					return err
				}
				calls, elapsed, err := load(ctx, s.balancer, m.tool, c.clients, c.warmup, c.duration, mark)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", s.label, m.tool, err)
				}
				*m.cps = float64(calls) / elapsed.Seconds()
				*m.cpu = (cpu[1] - cpu[0]) / time.Duration(max(calls, 1))
				if f.counted {
					*m.stmts = (float64(marks[1]-marks[0]) - f.idleRate*elapsed.Seconds()) / float64(calls)
				}
			}
			results[s] = append(results[s], f)
			fmt.Printf("  round %d %-12s echo %7.0f calls/s (%s CPU)   kv get %7.0f calls/s (%s CPU)\n",
				round+1, s.label, f.echoCPS, us(f.echoCPU), f.getCPS, us(f.getCPU))
		}
	}

	fmt.Println()
	fmt.Printf("%-12s %14s %7s %10s %14s %7s %10s %11s %10s %13s\n", "", "echo calls/s", "ratio", "CPU/call", "get calls/s", "ratio", "CPU/call", "stmts/echo", "stmts/get", "idle stmts/s")
	base := results[setups[0]]
	baseEcho, baseGet := median(pick(base, func(f figures) float64 { return f.echoCPS })), median(pick(base, func(f figures) float64 { return f.getCPS }))
	for _, s := range setups {
		fs := results[s]
		echo, get := median(pick(fs, func(f figures) float64 { return f.echoCPS })), median(pick(fs, func(f figures) float64 { return f.getCPS }))
		stmtsEcho, stmtsGet, idle := "-", "-", "-"
		if len(fs) > 0 && fs[0].counted {
			stmtsEcho = fmt.Sprintf("%.2f", median(pick(fs, func(f figures) float64 { return f.echoStmts })))
			stmtsGet = fmt.Sprintf("%.2f", median(pick(fs, func(f figures) float64 { return f.getStmts })))
			idle = fmt.Sprintf("%.1f", median(pick(fs, func(f figures) float64 { return f.idleRate })))
		}
		echoCPU := time.Duration(median(pick(fs, func(f figures) float64 { return float64(f.echoCPU) })))
		getCPU := time.Duration(median(pick(fs, func(f figures) float64 { return float64(f.getCPU) })))
		fmt.Printf("%-12s %14.0f %7.2f %10s %14.0f %7.2f %10s %11s %10s %13s\n",
			s.label, echo, echo/baseEcho, us(echoCPU), get, get/baseGet, us(getCPU), stmtsEcho, stmtsGet, idle)
	}

	// A replica that keeps sessions, so that its client hears of deploys.
	listener, err := start("listener", replicas.Options{State: c.state, Root: filepath.Join(work, "cache-listener"), Stateful: true})
	if err != nil {
		return err
	}
	notified, answered, err := deployLatency(ctx, c, onPG[0], listener, echoWasm, kvWasm)
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Printf("deploy through one replica's control API -> tools/list_changed on another replica's client, %d deploys:\n", len(notified))
	fmt.Printf("  notified  p50 %s  p99 %s  (max %s)\n", ms(percentile(notified, 50)), ms(percentile(notified, 99)), ms(slices.Max(notified)))
	fmt.Printf("  (the deploy's PUT answered: p50 %s  p99 %s)\n", ms(percentile(answered, 50)), ms(percentile(answered, 99)))
	target := "met"
	if percentile(notified, 99) >= time.Second {
		target = "MISSED"
	}
	fmt.Printf("target %s: p99 under 1 s\n", target)
	return nil
}

// load calls tool through base with n clients for warmup and then for d,
// and returns the calls completed in d and d as measured; mark is called as
// the counted window opens and as it closes. Any failed call ends the
// measure with its error: a benchmark of failures is no benchmark.
func load(ctx context.Context, base, tool string, n int, warmup, d time.Duration, mark func() error) (int64, time.Duration, error) {
	sessions := make([]*mcp.ClientSession, n)
	for i := range sessions {
		cs, err := connect(ctx, base, nil, false)
		if err != nil {
			return 0, 0, err
		}
		defer cs.Close()
		sessions[i] = cs
	}
	var counting atomic.Bool
	var calls atomic.Int64
	stop := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for _, cs := range sessions {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"message": "hi"}})
				if err == nil && res.IsError {
					err = fmt.Errorf("%s: tool error: %v", tool, res.Content)
				}
				if err != nil {
					errs <- err
					return
				}
				if counting.Load() {
					calls.Add(1)
				}
			}
		})
	}
	timer := func(d time.Duration) error {
		select {
		case <-time.After(d):
			return nil
		case err := <-errs:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := timer(warmup)
	if err == nil {
		err = mark()
	}
	start := time.Now()
	counting.Store(true)
	if err == nil {
		err = timer(d)
	}
	counting.Store(false)
	elapsed := time.Since(start)
	if err == nil {
		err = mark()
	}
	close(stop)
	wg.Wait()
	if err != nil {
		return 0, 0, err
	}
	select {
	case err := <-errs:
		return 0, 0, err
	default:
	}
	return calls.Load(), elapsed, nil
}

// deployLatency deploys through from's control API, alternating two images
// under one name so that every deploy changes the tools, and times each to
// the tools/list_changed that to's client receives.
func deployLatency(ctx context.Context, c config, from, to *replicas.Replica, images ...string) (notified, answered []time.Duration, err error) {
	changed := make(chan time.Time, 64)
	cs, err := connect(ctx, to.URL, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- time.Now() },
	}, true)
	if err != nil {
		return nil, nil, err
	}
	defer cs.Close()
	var bodies [][]byte
	for _, name := range images {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, nil, err
		}
		bodies = append(bodies, b)
	}
	for i := range c.deploys {
		for len(changed) > 0 {
			<-changed
		}
		start := time.Now()
		if err := from.PutProgram(ctx, "lat", bodies[i%len(bodies)]); err != nil {
			return nil, nil, err
		}
		answered = append(answered, time.Since(start))
		select {
		case at := <-changed:
			notified = append(notified, at.Sub(start))
		case <-time.After(10 * time.Second):
			return nil, nil, fmt.Errorf("deploy %d: no tools/list_changed on %s within 10 s", i+1, to.Name)
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		// Apart, so that no two deploys fold into one notification.
		time.Sleep(50 * time.Millisecond)
	}
	return notified, answered, nil
}

// statements counts what PostgreSQL ran in the benchmark's database, by
// pg_stat_statements, which counts each statement executed (not the
// prepares, nor pgx's empty-query pings of idle connections).
type statements struct{ conn *pgx.Conn }

func openStatements(ctx context.Context, url string) (*statements, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	s := &statements{conn}
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	if _, err := s.count(ctx); err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("%w (bench.sh starts PostgreSQL with shared_preload_libraries=pg_stat_statements)", err)
	}
	return s, nil
}

func (s *statements) Close(ctx context.Context) error { return s.conn.Close(ctx) }

// count is the statements run so far in this database, the benchmark's own
// reads of pg_stat_statements left out.
func (s *statements) count(ctx context.Context) (int64, error) {
	var n int64
	err := s.conn.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND query NOT LIKE '%pg_stat_statements%'`).Scan(&n)
	return n, err
}

// idleRate is the statements per second the replicas send with no calls:
// their periodic resync and the like.
func (s *statements) idleRate(ctx context.Context, d time.Duration) (float64, error) {
	before, err := s.count(ctx)
	if err != nil {
		return 0, err
	}
	time.Sleep(d)
	after, err := s.count(ctx)
	if err != nil {
		return 0, err
	}
	return float64(after-before) / d.Seconds(), nil
}

// connect opens an MCP session at base; standalone opens the stream of
// server-initiated messages, which a stateless replica does not serve.
func connect(ctx context.Context, base string, opts *mcp.ClientOptions, standalone bool) (*mcp.ClientSession, error) {
	transport := &mcp.StreamableClientTransport{
		Endpoint:             base + "/mcp",
		HTTPClient:           &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}},
		DisableStandaloneSSE: !standalone,
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "berm-bench-replicas", Version: "0"}, opts).Connect(ctx, transport, nil)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", base, err)
	}
	return cs, nil
}

func callOnce(ctx context.Context, base, tool string, args any) error {
	cs, err := connect(ctx, base, nil, false)
	if err != nil {
		return err
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err == nil && res.IsError {
		err = fmt.Errorf("tool error: %v", res.Content)
	}
	return err
}

func pick(fs []figures, f func(figures) float64) []float64 {
	out := make([]float64, len(fs))
	for i := range fs {
		out[i] = f(fs[i])
	}
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// percentile is the nearest-rank percentile.
func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	i := (p*len(s) + 99) / 100
	return s[max(i-1, 0)]
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d.Nanoseconds())/1000) }

// cpuTime is the user and system CPU time the processes have used so far,
// from /proc (Linux; 0 elsewhere), in clock ticks of 10 ms: a measure of
// seconds of calls is long enough for them. Unlike calls per second, it
// holds up when other work shares the cores.
func cpuTime(rs []*replicas.Replica) time.Duration {
	var total time.Duration
	for _, r := range rs {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.Pid()))
		if err != nil {
			continue
		}
		// Fields after the command name, which ends at the last ')':
		// utime and stime are the 14th and 15th of the line.
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(fields) < 13 {
			continue
		}
		var utime, stime int64
		fmt.Sscan(fields[11], &utime)
		fmt.Sscan(fields[12], &stime)
		total += time.Duration(utime+stime) * 10 * time.Millisecond
	}
	return total
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
