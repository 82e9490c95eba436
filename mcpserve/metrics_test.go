package mcpserve_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

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
	<-h.srv.Ready()
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

// BenchmarkCallMetrics is the echo call over in-memory transports with
// metrics off and on: the cost of metrics on the hot path.
func BenchmarkCallMetrics(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			cs := benchServer(b, on)
			args := map[string]any{"message": "hi"}
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo_echo", Arguments: args}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchServer serves echo, as newHarness and connect do for tests.
func benchServer(b *testing.B, metrics bool) *mcp.ClientSession {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	st, err := store.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	var srv *mcpserve.Server
	rt, err := runtime.New(ctx, runtime.DefaultCallDepth, host.Syscalls(st), &runtime.Options{
		CacheDir:     st.CacheDir(),
		Imports:      []runtime.HostModule{host.WASI()},
		ModuleConfig: host.ModuleConfig(),
		Log:          func(ctx context.Context, p, tool string, line []byte) { srv.Log(ctx, p, tool, line) },
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close(context.Background()) })
	svc := service.New(rt, st, &service.Options{Check: mcpserve.Checker(mcpserve.Underscore)})
	image, err := os.ReadFile(filepath.Join("..", "testdata", "echo.wasm"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := svc.Deploy(ctx, "echo", image, "echo.wasm", nil); err != nil {
		b.Fatal(err)
	}
	srv = mcpserve.New(svc, nil)
	if metrics {
		srv.Handler(mcpserve.HTTPConfig{Metrics: true}) // turns them on
	}
	if err := srv.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close(context.Background()) })
	<-srv.Ready()
	sst, ct := mcp.NewInMemoryTransports()
	go srv.MCP().Run(ctx, sst)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: legacy})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}
