package mcpserve_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/berm-dev/berm/internal/mcpservice"
	"github.com/berm-dev/berm/internal/service"
	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/host"
	"github.com/berm-dev/berm/runtime/store"
)

// scrape gets /metrics with the token and parses it.
func scrape(t *testing.T, url, token string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// series finds the metric of a family with exactly the given labels.
func series(fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		match := true
		for _, l := range m.GetLabel() {
			if labels[l.GetName()] != l.GetValue() {
				match = false
			}
		}
		if match {
			return m
		}
	}
	return nil
}

func gauge(t *testing.T, fams map[string]*dto.MetricFamily, name string) float64 {
	t.Helper()
	m := series(fams, name, nil)
	if m == nil {
		t.Fatalf("no %s", name)
	}
	return m.GetGauge().GetValue() + m.GetCounter().GetValue()
}

func TestMetrics(t *testing.T) {
	h := newHarness(t, runtime.Limits{Deadline: 500 * time.Millisecond}, nil)
	h.deploy(t, "core", "core.wasm")
	const token = "s3cret"
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{Token: token, Metrics: true})
	<-h.srv.Loaded()
	cs, err := connectHTTP(t, ts.URL+"/mcp", &http.Client{Transport: bearer{token, http.DefaultTransport}})
	if err != nil {
		t.Fatal(err)
	}

	calls := []struct {
		tool    string
		args    any
		outcome string
		times   int
	}{
		{"core_empty", nil, "result", 3},
		{"core_fail", nil, "failure", 2},
		{"core_strict", map[string]any{"n": "three"}, "refused", 1},
		{"core_trap", nil, "trap", 1},
		{"core_loop", nil, "deadline", 1},
		{"core_big_result", nil, "limit", 1},
	}
	for _, c := range calls {
		for range c.times {
			call(t, cs, c.tool, c.args) // the outcome is TestToolsAndOutcomes's
		}
	}

	fams := scrape(t, ts.URL, token)
	for _, c := range calls {
		tool := c.tool[len("core_"):]
		m := series(fams, "berm_calls_total", map[string]string{"program": "core", "tool": tool, "outcome": c.outcome})
		if m == nil || m.GetCounter().GetValue() != float64(c.times) {
			t.Errorf("berm_calls_total{core,%s,%s} = %v, want %d", tool, c.outcome, m, c.times)
		}
		d := series(fams, "berm_call_duration_seconds", map[string]string{"program": "core", "tool": tool})
		if d == nil || d.GetHistogram().GetSampleCount() != uint64(c.times) {
			t.Errorf("berm_call_duration_seconds{core,%s} = %v, want %d samples", tool, d, c.times)
		}
	}
	if n := len(fams["berm_calls_total"].GetMetric()); n != len(calls) {
		t.Errorf("berm_calls_total has %d series, want %d", n, len(calls))
	}
	if d := series(fams, "berm_call_duration_seconds", map[string]string{"program": "core", "tool": "loop"}); d.GetHistogram().GetSampleSum() < 0.5 {
		t.Errorf("core_loop took %vs, want the deadline's 0.5s at least", d.GetHistogram().GetSampleSum())
	}
	for name, want := range map[string]float64{
		"berm_deployments":              1,
		"berm_mcp_sessions":             1,
		"berm_calls_in_flight":          0,
		"berm_tools_list_changed_total": 1,
	} {
		if got := gauge(t, fams, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}

	// Every route's rules hold on /metrics.
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Host = "evil.example:7777"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	refused(t, resp, http.StatusForbidden, "forbidden")
	resp, err = http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	refused(t, resp, http.StatusUnauthorized, "unauthorized")

	// A removed program's series go with it.
	if err := h.svc.Remove(context.Background(), "core", false); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		fams = scrape(t, ts.URL, token)
		if gauge(t, fams, "berm_deployments") == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("core still served")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if f := fams["berm_calls_total"]; len(f.GetMetric()) != 0 {
		t.Errorf("berm_calls_total after removal: %v", f)
	}
	if f := fams["berm_call_duration_seconds"]; len(f.GetMetric()) != 0 {
		t.Errorf("berm_call_duration_seconds after removal: %v", f)
	}
	if got := gauge(t, fams, "berm_tools_list_changed_total"); got != 2 {
		t.Errorf("berm_tools_list_changed_total = %v, want 2", got)
	}
}

func TestMetricsOff(t *testing.T) {
	h := newHarness(t, runtime.Limits{}, nil)
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{})
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /metrics without --metrics: %s, want 404", resp.Status)
	}
}

// metricsServer serves fixtures as berm serve does: with metrics on, the
// runtime's Observer and the store's DataUsage are wired to the server, and
// /metrics is served (ts, with the token); off, neither is (ts is nil). The
// client is connected over in-memory transports.
type metricsServer struct {
	st  *store.Store
	svc *service.Service
	srv *mcpserve.Server
	ts  *httptest.Server
	cs  *mcp.ClientSession
}

const metricsToken = "s3cret"

func newMetricsServer(tb testing.TB, metrics bool, limits runtime.Limits, opts mcpserve.Options, files ...string) *metricsServer {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	st, err := store.OpenDir(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	m := &metricsServer{st: st}
	ropts := &runtime.Config{
		CacheDir:     st.CacheDir(),
		Limits:       limits,
		Imports:      []runtime.HostModule{host.WASI()},
		ModuleConfig: host.ModuleConfig(),
		Log:          func(ctx context.Context, p, tool string, line []byte) { m.srv.Log(ctx, p, tool, line) },
	}
	if metrics {
		ropts.Observer = runtime.Observer{
			Compile:     func(d time.Duration, cache runtime.CacheResult) { m.srv.ObserveCompile(d, cache) },
			Instantiate: func(program string, d time.Duration) { m.srv.ObserveInstantiate(program, d) },
		}
		opts.DataUsage = st.DataUsage
	}
	ropts.Syscalls = host.Syscalls(st)
	rt, err := runtime.New(ctx, *ropts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rt.Close(context.Background()) })
	m.svc = service.New(rt, st, &service.Options{Check: mcpserve.Checker(mcpserve.Underscore), PollInterval: 50 * time.Millisecond})
	m.srv = mcpserve.New(mcpservice.New(m.svc), &opts)
	if metrics {
		m.ts = httptest.NewServer(m.srv.Handler(mcpserve.HTTPConfig{Token: metricsToken, Metrics: true}))
		tb.Cleanup(m.ts.Close)
	}
	if err := m.srv.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.srv.Close(context.Background()) })
	<-m.srv.Loaded()
	for _, file := range files {
		m.deploy(tb, strings.TrimSuffix(file, ".wasm"), file)
	}
	sst, ct := mcp.NewInMemoryTransports()
	go m.srv.MCP().Run(ctx, sst)
	m.cs, err = mcp.NewClient(&mcp.Implementation{Name: "metrics"}, nil).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: legacy})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.cs.Close() })
	return m
}

func (m *metricsServer) deploy(tb testing.TB, name, file string) {
	tb.Helper()
	image, err := os.ReadFile(filepath.Join("..", "testdata", file))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := m.svc.Deploy(context.Background(), name, image, file, nil); err != nil {
		tb.Fatal(err)
	}
	for start := time.Now(); m.srv.Programs()[name] == nil; time.Sleep(time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			tb.Fatalf("%s not served", name)
		}
	}
}

func (m *metricsServer) call(tb testing.TB, name, args string) *mcp.CallToolResult {
	tb.Helper()
	res, err := m.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return res
}

// value is a series' value: a counter's or gauge's, or a histogram's count.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	m := series(fams, name, labels)
	if m == nil {
		return -1
	}
	if h := m.GetHistogram(); h != nil {
		return float64(h.GetSampleCount())
	}
	return m.GetCounter().GetValue() + m.GetGauge().GetValue()
}

// TestMetricsRuntime: what the runtime, the queue and the store report, as
// berm serve --metrics wires them. Not parallel, as none of this file's
// tests are: they count compiles, and a loaded machine widens the window in
// which the service's sync compiles a deployment a second time.
func TestMetricsRuntime(t *testing.T) {
	m := newMetricsServer(t, true, runtime.Limits{Deadline: 2 * time.Second}, mcpserve.Options{MaxConcurrent: 1},
		"echo.wasm", "kv.wasm", "core.wasm")
	m.deploy(t, "again", "echo.wasm") // compiled already, in memory
	type want = map[string]int
	check := func(what string, fams map[string]*dto.MetricFamily, name string, labels map[string]string, want float64) {
		t.Helper()
		if got := value(fams, name, labels); got != want {
			t.Errorf("%s: %s%v = %v, want %v", what, name, labels, got, want)
		}
	}
	fams := scrape(t, m.ts.URL, metricsToken)
	for result, n := range (want{"miss": 3, "hit": 1, "repair": 0}) {
		check("at deploy", fams, "berm_compile_cache_total", map[string]string{"result": result}, float64(n))
	}
	check("at deploy", fams, "berm_compile_duration_seconds", nil, 4)
	if f := fams["berm_instantiate_duration_seconds"]; len(f.GetMetric()) != 0 {
		t.Errorf("instances before any call: %v", f)
	}

	const echoArgs, kvArgs, failArgs = `{"message":"hi"}`, `{"v":"some value"}`, `{"why":"because"}`
	for range 3 {
		if got := text(t, m.call(t, "echo_echo", echoArgs)); got != echoArgs {
			t.Fatalf("echo = %q", got)
		}
	}
	if got := text(t, m.call(t, "kv_set", kvArgs)); got != "set" {
		t.Fatalf("kv_set = %q", got)
	}
	if got := text(t, m.call(t, "kv_get", "{}")); got != kvArgs {
		t.Fatalf("kv_get = %q", got)
	}
	if res := m.call(t, "core_fail", failArgs); !res.IsError || text(t, res) != "it failed on purpose" {
		t.Fatalf("core_fail = %v", res)
	}
	m.call(t, "core_strict", `{"n":"three"}`) // refused: no instance, no result

	fams = scrape(t, m.ts.URL, metricsToken)
	for program, n := range (want{"echo": 3 * len(echoArgs), "kv": len(kvArgs) + len("{}"), "core": len(failArgs) + len(`{"n":"three"}`)}) {
		check("after calls", fams, "berm_call_args_bytes_total", map[string]string{"program": program}, float64(n))
	}
	for program, n := range (want{"echo": 3 * len(echoArgs), "kv": len("set") + len(kvArgs), "core": len("it failed on purpose")}) {
		check("after calls", fams, "berm_call_result_bytes_total", map[string]string{"program": program}, float64(n))
	}
	// An instance per call on the plain path; a pooled one serves several.
	instances := func(what string, fams map[string]*dto.MetricFamily, program string, calls int) {
		t.Helper()
		if got := value(fams, "berm_instantiate_duration_seconds", map[string]string{"program": program}); got < 1 || got > float64(calls) {
			t.Errorf("%s: %d calls of %s made %v instances, want 1 to %d", what, calls, program, got, calls)
		}
	}
	for program, n := range (want{"echo": 3, "kv": 2, "core": 1}) {
		instances("after calls", fams, program, n)
	}
	// One entry of 4+1+18 bytes: one block, as the quota charges it.
	for program, n := range (want{"kv": store.BlockSize, "echo": 0, "again": 0, "core": 0}) {
		check("after kv_set", fams, "berm_kv_bytes", map[string]string{"program": program}, float64(n))
	}
	if got, err := m.st.DataUsage("kv"); err != nil || got != store.BlockSize {
		t.Errorf("store's DataUsage(kv) = %d, %v", got, err)
	}
	check("idle", fams, "berm_calls_waiting", nil, 0)

	// With --max-concurrent 1, a call behind one that loops waits.
	done := make(chan struct{}, 2)
	go func() {
		m.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "core_loop"})
		done <- struct{}{}
	}()
	for start := time.Now(); m.srv.InFlight() == 0 && time.Since(start) < 5*time.Second; {
		time.Sleep(time.Millisecond)
	}
	go func() {
		m.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo_echo", Arguments: json.RawMessage(echoArgs)})
		done <- struct{}{}
	}()
	waited := false
	for start := time.Now(); time.Since(start) < 2*time.Second; time.Sleep(5 * time.Millisecond) {
		if value(scrape(t, m.ts.URL, metricsToken), "berm_calls_waiting", nil) == 1 {
			waited = true
			break
		}
	}
	if !waited {
		t.Error("berm_calls_waiting never 1 behind core_loop")
	}
	<-done
	<-done
	fams = scrape(t, m.ts.URL, metricsToken)
	check("after the wait", fams, "berm_calls_waiting", nil, 0)
	check("after the wait", fams, "berm_calls_in_flight", nil, 0)
	check("after the wait", fams, "berm_calls_total", map[string]string{"program": "core", "tool": "loop", "outcome": "deadline"}, 1)
	instances("after the wait", fams, "echo", 4)

	// A removed program's series go with it.
	if err := m.svc.Remove(context.Background(), "kv", false); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); value(fams, "berm_deployments", nil) != 3; fams = scrape(t, m.ts.URL, metricsToken) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("kv still served")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, name := range []string{"berm_call_args_bytes_total", "berm_call_result_bytes_total", "berm_instantiate_duration_seconds", "berm_kv_bytes"} {
		if series(fams, name, map[string]string{"program": "kv"}) != nil {
			t.Errorf("%s{kv} after removal", name)
		}
		if series(fams, name, map[string]string{"program": "echo"}) == nil {
			t.Errorf("%s{echo} gone with kv", name)
		}
	}
}

// BenchmarkCallMetrics is the echo call over in-memory transports to two
// servers, one with metrics off and one with them on (the runtime's Observer
// included): the cost of metrics on the hot path. The calls alternate, one
// to each server an iteration, in turn first, so that the machine's changes
// of speed (another job, the CPU's clock) fall on both alike. It reports
// each one's time per call and their ratio:
//
//	go test ./mcpserve/ -run '^$' -bench CallMetrics -count 10
func BenchmarkCallMetrics(b *testing.B) {
	off := newMetricsServer(b, false, runtime.Limits{}, mcpserve.Options{}, "echo.wasm")
	on := newMetricsServer(b, true, runtime.Limits{}, mcpserve.Options{}, "echo.wasm")
	args := map[string]any{"message": "hi"}
	ctx := context.Background()
	timed := func(m *metricsServer) time.Duration {
		start := time.Now()
		if _, err := m.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo_echo", Arguments: args}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var tOff, tOn time.Duration
	n := 0
	for b.Loop() {
		if n%2 == 0 {
			tOff += timed(off)
			tOn += timed(on)
		} else {
			tOn += timed(on)
			tOff += timed(off)
		}
		n++
	}
	b.ReportMetric(float64(tOff.Nanoseconds())/float64(n), "off-ns/call")
	b.ReportMetric(float64(tOn.Nanoseconds())/float64(n), "on-ns/call")
	b.ReportMetric(float64(tOn)/float64(tOff), "on/off")
}
