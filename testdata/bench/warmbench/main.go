// Command warmbench measures issue 11's targets ("calls that start warm") in
// one run, the default (fast) path and the plain one (BERM_PLAIN=1,
// runtime.Config.Plain) side by side with a reference for each, and prints
// the table of medians and ratios. warm.sh beside it builds what it drives
// and prepares the root:
//
//	bash testdata/bench/warm.sh
//
// What it runs:
//   - the runtime's BenchmarkWarm* (runtime/warm_bench_test.go) from a test
//     binary: the tiny echo, the Go-built example, the compute kernel against
//     wazero with no deadline, echo calls per second on every core, and 1,000
//     calls held in flight (one process per path, for VmHWM to be its own);
//   - the Go-built example's tools/call over berm serve --stdio, from one Go
//     SDK client;
//   - berm run of the kernel, the whole process, against the same C built
//     natively;
//   - mcpserve/testdata/bench.sh, berm's echo against the Node reference
//     server over stdio, once per path.
//
// It exits 1 when a target is missed, after printing every figure.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type config struct {
	berm, test, pkgDir, root, native string
	count, inflightRuns              int
	mcpCalls, runs, mib              int
	mcpBench                         string // the path of mcpserve/testdata/bench.sh; "" skips it
	mcpBenchArgs                     []string
}

func main() {
	var c config
	flag.StringVar(&c.berm, "berm", "", "the berm binary")
	flag.StringVar(&c.test, "test", "", "the runtime package's test binary (go test -c ./runtime)")
	flag.StringVar(&c.pkgDir, "pkg", "runtime", "the runtime package's directory, where its test binary runs")
	flag.StringVar(&c.root, "root", "", "a berm root with hello (examples/hello) and kernel (runtime/testdata/kernel) deployed")
	flag.StringVar(&c.native, "native", "", "the kernel built natively from runtime/testdata/kernel/kernel.c")
	flag.IntVar(&c.count, "count", 5, "runs of each in-process benchmark; the figure is their median")
	flag.IntVar(&c.inflightRuns, "inflight-runs", 3, "processes per path holding 1,000 calls in flight")
	flag.IntVar(&c.mcpCalls, "mcp-calls", 300, "measured tools/call of the Go example over MCP, per path")
	flag.IntVar(&c.runs, "runs", 3, "berm run and native runs of the heavy kernel, per path")
	flag.IntVar(&c.mib, "mib", 32, "MiB the heavy kernel hashes in berm run")
	flag.StringVar(&c.mcpBench, "mcpbench", "", "mcpserve/testdata/bench.sh, run once per path; empty skips it")
	mcpArgs := flag.String("mcpbench-args", "-rounds 3 -n 1000 -starts 3 -cold=false", "arguments for bench.sh")
	flag.Parse()
	c.mcpBenchArgs = strings.Fields(*mcpArgs)
	if c.berm == "" || c.test == "" || c.root == "" || c.native == "" {
		fmt.Fprintln(os.Stderr, "warmbench: -berm, -test, -root and -native are required (warm.sh gives them)")
		os.Exit(2)
	}
	misses, err := run(context.Background(), c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmbench:", err)
		os.Exit(1)
	}
	if misses > 0 {
		fmt.Printf("\n%d target(s) missed\n", misses)
		os.Exit(1)
	}
}

// row is one line of the table: a figure per path and the reference's, and
// the target, checked on the ratio or on the fast figure alone.
type row struct {
	what, unit       string
	fast, plain, ref float64 // NaN when not measured
	refName          string
	target           string
	met              func(r row) bool
	ratio            func(r row) float64 // shown as "ratio"; nil shows fast/ref
	ratioName        string
}

func run(ctx context.Context, c config) (int, error) {
	var rows []row
	began := time.Now()
	step := func(what string) {
		fmt.Fprintf(os.Stderr, "\n== %s (at %s)\n", what, time.Since(began).Round(time.Second))
	}

	step("in-process benchmarks (runtime/warm_bench_test.go)")
	bench := runBench(c, "^BenchmarkWarm(Echo|Go|Parallel)$", "-test.count", strconv.Itoa(c.count), "-test.benchmem")
	// Idle between calls, and so without -benchmem, whose reads of the
	// memory statistics at each pause would stop the world.
	for name, metrics := range runBench(c, "^BenchmarkWarmGoIdle$", "-test.count", strconv.Itoa(c.count)) {
		bench[name] = metrics
	}
	// The kernel runs a second or more a call on the plain path: fewer runs.
	for name, metrics := range runBench(c, "^BenchmarkWarmKernel$", "-test.count", strconv.Itoa(min(c.count, 3))) {
		bench[name] = metrics
	}
	us, ms := 1e-3, 1e-6
	rows = append(rows,
		row{what: "echo per call, in process", unit: "µs",
			fast: bench.median("WarmEcho/fast", "ns/op") * us, plain: bench.median("WarmEcho/plain", "ns/op") * us,
			ref: bench.median("WarmEcho/bare", "ns/op") * us, refName: "bare wazero",
			target: "fast/ref ≤ 0.33", met: func(r row) bool { return r.fast/r.ref <= 1.0/3 }},
		row{what: "echo allocations per call", unit: "allocs",
			fast: bench.median("WarmEcho/fast", "allocs/op"), plain: bench.median("WarmEcho/plain", "allocs/op"),
			ref: bench.median("WarmEcho/bare", "allocs/op"), refName: "bare wazero"},
		row{what: "Go example per call, in process", unit: "µs",
			fast: bench.median("WarmGo/fast", "ns/op") * us, plain: bench.median("WarmGo/plain", "ns/op") * us,
			ref: nan, target: "plain/fast ≥ 10", ratioName: "plain/fast",
			ratio: func(r row) float64 { return r.plain / r.fast }, met: func(r row) bool { return r.plain/r.fast >= 10 }},
		row{what: "Go example, 500 µs idle between calls", unit: "µs",
			fast: bench.median("WarmGoIdle/fast", "ns/op") * us, plain: bench.median("WarmGoIdle/plain", "ns/op") * us,
			ref: nan, ratioName: "plain/fast", ratio: func(r row) float64 { return r.plain / r.fast }},
		row{what: "kernel 16 MiB, deadline on, in process", unit: "ms",
			fast: bench.median("WarmKernel/fast", "ns/op") * ms, plain: bench.median("WarmKernel/plain", "ns/op") * ms,
			ref: bench.median("WarmKernel/nodeadline", "ns/op") * ms, refName: "no deadline",
			target: "fast/ref ≤ 1.1", met: func(r row) bool { return r.fast/r.ref <= 1.1 }},
		row{what: "echo calls per second, 2 cores", unit: "calls/s",
			fast: bench.median("WarmParallel/fast", "calls/s"), plain: bench.median("WarmParallel/plain", "calls/s"),
			ref: nan, target: "fast ≥ 100,000", met: func(r row) bool { return r.fast >= 100000 }},
	)

	step("1,000 echo calls held in flight, one process per path and run")
	var peak [2][]float64
	for range c.inflightRuns {
		for i, path := range []string{"fast", "plain"} {
			b := runBench(c, "^BenchmarkWarmInFlight$/^"+path+"$", "-test.benchtime", "1x", "-test.count", "1")
			peak[i] = append(peak[i], b.median("WarmInFlight/"+path, "MB-hwm"))
		}
	}
	rows = append(rows, row{what: "1,000 echo calls in flight, VmHWM", unit: "MB",
		fast: median(peak[0]), plain: median(peak[1]), ref: nan,
		target: "fast ≤ 300", met: func(r row) bool { return r.fast <= 300 }})

	step("the Go example's tools/call over berm serve --stdio")
	goMCP := [2]float64{nan, nan}
	for i, env := range [][]string{nil, {"BERM_PLAIN=1"}} {
		p50, err := mcpGreet(ctx, c, env)
		if err != nil {
			failed = append(failed, fmt.Sprintf("hello_greet over MCP (%s): %v", pathName(i), err))
			continue
		}
		goMCP[i] = float64(p50.Nanoseconds()) * us
		fmt.Fprintf(os.Stderr, "%s: p50 %.0f µs\n", pathName(i), goMCP[i])
	}
	rows = append(rows, row{what: "Go example tools/call p50, stdio", unit: "µs",
		fast: goMCP[0], plain: goMCP[1], ref: nan, target: "fast ≤ 400 µs",
		ratioName: "plain/fast", ratio: func(r row) float64 { return r.plain / r.fast },
		met: func(r row) bool { return r.fast <= 400 }})

	step(fmt.Sprintf("berm run of the kernel over %d MiB, the whole process, and the same C built natively", c.mib))
	args := fmt.Sprintf(`{"mib":%d}`, c.mib)
	native, err := timeRuns(c.runs, nil, c.native, strconv.Itoa(c.mib))
	if err != nil {
		return 0, fmt.Errorf("native kernel: %w", err)
	}
	bermRun := [2]float64{nan, nan}
	for i, env := range [][]string{nil, {"BERM_PLAIN=1"}} {
		// One run first, so that the compile cache is warm for the others.
		env = append([]string{"BERM_ROOT=" + c.root, "BERM_SERVER=", "BERM_TOKEN="}, env...)
		d, err := timeRuns(c.runs+1, env, c.berm, "run", "kernel", "sha256", args)
		if err != nil {
			failed = append(failed, fmt.Sprintf("berm run (%s): %v", pathName(i), err))
			continue
		}
		bermRun[i] = d
	}
	rows = append(rows, row{what: fmt.Sprintf("berm run kernel %d MiB, whole process", c.mib), unit: "ms",
		fast: bermRun[0] * ms, plain: bermRun[1] * ms, ref: native * ms, refName: "native (gcc -O2)",
		target: "fast/ref ≤ 1.6", met: func(r row) bool { return r.fast/r.ref <= 1.6 }})

	if c.mcpBench != "" {
		step("MCP echo over stdio against the Node reference server (mcpserve/testdata/bench.sh)")
		var p50 [2]float64
		ref := nan
		for i, env := range []string{"", "BERM_PLAIN=1"} {
			args := append([]string{c.mcpBench}, c.mcpBenchArgs...)
			if env != "" {
				args = append(args, "-berm-env", env)
			}
			berm, node, err := runMCPBench(args)
			if err != nil {
				failed = append(failed, fmt.Sprintf("bench.sh (%s): %v", pathName(i), err))
			}
			p50[i] = berm
			if i == 0 || math.IsNaN(ref) {
				ref = node
			}
		}
		rows = append(rows, row{what: "MCP echo tools/call p50, stdio", unit: "µs",
			fast: p50[0], plain: p50[1], ref: ref, refName: "Node server-everything",
			target: "fast/ref ≤ 1", met: func(r row) bool { return r.fast <= r.ref }})
	}

	misses := printTable(rows)
	if len(failed) > 0 {
		fmt.Printf("\nfailed benchmarks, their figures left out:\n")
		for _, f := range failed {
			fmt.Printf("  %s\n", f)
		}
	}
	return misses, nil
}

var nan = math.NaN()

func pathName(i int) string { return [...]string{"fast", "plain"}[i] }

// printTable prints the rows and returns how many targets were missed (a
// target not measured counts as missed).
func printTable(rows []row) int {
	fmt.Printf("\nissue 11, calls that start warm: medians; fast is the default path, plain BERM_PLAIN=1\n\n")
	fmt.Printf("%-40s %-8s %12s %12s %12s %-22s %16s %-16s %s\n", "measure", "unit", "fast", "plain", "reference", "(reference)", "ratio", "target", "")
	misses := 0
	for _, r := range rows {
		ratioName, ratio := "fast/ref", r.fast/r.ref
		if r.ratio != nil {
			ratioName, ratio = r.ratioName, r.ratio(r)
		}
		verdict := ""
		if r.met != nil {
			measured := !math.IsNaN(r.fast) && (r.refName == "" || !math.IsNaN(r.ref)) && (r.ratio == nil || !math.IsNaN(ratio))
			switch {
			case !measured:
				verdict, misses = "not measured", misses+1
			case r.met(r):
				verdict = "met"
			default:
				verdict, misses = "MISSED", misses+1
			}
		}
		ratioText := ""
		if !math.IsNaN(ratio) {
			ratioText = fmt.Sprintf("%.2f", ratio)
			if ratioName != "fast/ref" {
				ratioText = ratioName + " " + ratioText
			}
		}
		fmt.Printf("%-40s %-8s %12s %12s %12s %-22s %16s %-16s %s\n", r.what, r.unit, figure(r.fast), figure(r.plain), figure(r.ref), r.refName, ratioText, r.target, verdict)
	}
	return misses
}

func figure(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// failed lists the benchmarks that failed, and why, for the end of the run.
var failed []string

// benchResults are the metrics of a go test -bench run: by benchmark name
// (without "Benchmark" and the -N of GOMAXPROCS) and unit, one value a run.
type benchResults map[string]map[string][]float64

func (b benchResults) median(name, unit string) float64 {
	return median(b[name][unit])
}

// runBench runs the test binary's benchmarks matching pattern in the
// package's directory, echoing its output to stderr.
func runBench(c config, pattern string, args ...string) benchResults {
	cmd := exec.Command(c.test, append([]string{"-test.run", "^$", "-test.bench", pattern}, args...)...)
	cmd.Dir = c.pkgDir
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, os.Stderr)
	cmd.Stderr = os.Stderr
	// A benchmark that fails leaves its figures out (the table shows "-"
	// and the target unmeasured) and the others stand: one path broken
	// while it is being built should not hide the rest of the run.
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "warmbench: %s -test.bench %s: %v\n", filepath.Base(c.test), pattern, err)
	}
	results := benchResults{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "--- FAIL: Benchmark"); ok {
			failed = append(failed, strings.TrimSpace(name))
			if sc.Scan() { // the first line of its log says why
				failed[len(failed)-1] += ": " + strings.TrimSpace(sc.Text())
			}
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		name := strings.TrimPrefix(fields[0], "Benchmark")
		if i := strings.LastIndex(name, "-"); i > 0 {
			name = name[:i]
		}
		if results[name] == nil {
			results[name] = map[string][]float64{}
		}
		// fields[1] is the iterations; then value, unit pairs.
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				break
			}
			results[name][fields[i+1]] = append(results[name][fields[i+1]], v)
		}
	}
	return results
}

// mcpGreet starts berm serve --stdio on the root and returns the p50 of
// hello_greet over one Go SDK client.
func mcpGreet(ctx context.Context, c config, env []string) (time.Duration, error) {
	cmd := exec.Command(c.berm, "serve", "--stdio")
	cmd.Env = append(append(os.Environ(), "BERM_ROOT="+c.root, "BERM_SERVER=", "BERM_TOKEN="), env...)
	client := mcp.NewClient(&mcp.Implementation{Name: "warmbench", Version: "0"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return 0, err
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "hello_greet", Arguments: map[string]any{"name": "bench"}}
	var took []time.Duration
	for i := range c.mcpCalls + c.mcpCalls/10 {
		start := time.Now()
		res, err := cs.CallTool(ctx, params)
		d := time.Since(start)
		if err != nil {
			return 0, err
		}
		if text, ok := res.Content[0].(*mcp.TextContent); res.IsError || !ok || text.Text != "Hello, bench!" {
			return 0, fmt.Errorf("hello_greet answered %+v", res.Content)
		}
		if i >= c.mcpCalls/10 { // the first tenth warms up
			took = append(took, d)
		}
	}
	slices.Sort(took)
	return took[len(took)/2], nil
}

// timeRuns runs a command n times and returns the median wall time in
// nanoseconds, of all runs but the first when n is more than one.
func timeRuns(n int, env []string, name string, args ...string) (float64, error) {
	var took []float64
	for i := range n {
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stderr = os.Stderr
		start := time.Now()
		out, err := cmd.Output()
		d := time.Since(start)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		if len(bytes.TrimSpace(out)) != 64 {
			return 0, fmt.Errorf("%s printed %q, want a hex SHA-256", name, out)
		}
		if n == 1 || i > 0 {
			took = append(took, float64(d.Nanoseconds()))
		}
	}
	fmt.Fprintf(os.Stderr, "%s %s: median %.1f ms of %d\n", name, strings.Join(args, " "), median(took)/1e6, len(took))
	return median(took), nil
}

// runMCPBench runs bench.sh and reads berm's and the reference's p50 over
// stdio from its table ("stdio berm P50 ..." and "stdio reference P50 ...").
func runMCPBench(args []string) (berm, ref float64, err error) {
	cmd := exec.Command("bash", args...)
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, os.Stderr)
	cmd.Stderr = os.Stderr
	runErr := cmd.Run() // it exits 1 when one of its own targets is missed
	berm, ref = nan, nan
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || f[0] != "stdio" {
			continue
		}
		v, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			continue
		}
		switch f[1] {
		case "berm":
			berm = v
		case "reference":
			ref = v
		}
	}
	if math.IsNaN(berm) || math.IsNaN(ref) {
		return berm, ref, errors.Join(errors.New("no stdio p50 of berm and the reference in its output"), runErr)
	}
	return berm, ref, nil
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return nan
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
