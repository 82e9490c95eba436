package mcpserve

import (
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/berm-dev/berm/runtime"
)

// metrics are the server's Prometheus metrics, in a registry of its own. The
// only labels are program names (bounded by deployments), tool names
// (bounded by manifests) and the few values of an outcome or a cache result;
// a removed program's series are deleted.
type metrics struct {
	reg         *prometheus.Registry
	calls       *prometheus.CounterVec   // program, tool, outcome
	duration    *prometheus.HistogramVec // program, tool
	argsBytes   *prometheus.CounterVec   // program
	resultBytes *prometheus.CounterVec   // program
	instantiate *prometheus.HistogramVec // program
	compile     prometheus.Histogram
	cache       *prometheus.CounterVec // result
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berm_calls_total",
			Help: "Tool calls run, by program, tool and outcome (result, failure, refused, trap, deadline, limit, error).",
		}, []string{"program", "tool", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berm_call_duration_seconds",
			Help:    "Time a tool call takes to run, by program and tool.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"program", "tool"}),
		argsBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berm_call_args_bytes_total",
			Help: "Bytes of the arguments of the tool calls run (the JSON object the program reads), by program.",
		}, []string{"program"}),
		resultBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berm_call_result_bytes_total",
			Help: "Bytes of the results and failure messages the program gave its tool calls, by program.",
		}, []string{"program"}),
		instantiate: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berm_instantiate_duration_seconds",
			Help:    "Time to make a call's instance of a program ready for the tool, _initialize included, nested calls' too, by program.",
			Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"program"}),
		compile: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "berm_compile_duration_seconds",
			Help:    "Time to compile a program at deploy (or load it from the compiled-code cache).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berm_compile_cache_total",
			Help: "Compiles by what the compiled-code cache did: hit (no code compiled), miss (compiled and cached), repair (a damaged entry compiled anew).",
		}, []string{"result"}),
	}
	for _, r := range []runtime.CacheResult{runtime.CacheHit, runtime.CacheMiss, runtime.CacheRepair} {
		m.cache.WithLabelValues(string(r))
	}
	m.reg.MustRegister(m.calls, m.duration, m.argsBytes, m.resultBytes, m.instantiate, m.compile, m.cache,
		// Counted whether metrics are on or not: Start applies the
		// deployments it finds before the HTTP service turns them on.
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "berm_tools_list_changed_total",
			Help: "Changes of deployments applied to the tools served (each sends tools/list_changed).",
		}, func() float64 { return float64(s.listChanged.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "berm_calls_in_flight",
			Help: "Tool calls running or waiting to run.",
		}, func() float64 { return float64(s.InFlight()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "berm_calls_waiting",
			Help: "Tool calls waiting to run, --max-concurrent calls running.",
		}, func() float64 { return float64(s.queue.waiting()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "berm_calls_refused_busy_total",
			Help: "Tool calls refused because as many waited as may (--max-waiting, or a quarter of it in one session).",
		}, func() float64 { return float64(s.busy.total.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "berm_results_unsent_bytes",
			Help: "Bytes of results of 64 KiB or more not yet written to their clients over HTTP (--max-unsent-results).",
		}, func() float64 { return float64(s.unsent.inUse()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "berm_deployments",
			Help: "Programs served.",
		}, func() float64 { return float64(s.programCount()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "berm_mcp_sessions",
			Help: "MCP sessions open.",
		}, func() float64 { return float64(s.sessions()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "berm_mcp_sessions_replaced_total",
			Help: "Idle MCP sessions ended to make room for a new one (--max-sessions, --max-sessions-per-client).",
		}, func() float64 {
			if t := s.table.Load(); t != nil {
				return float64(t.evicted.Load())
			}
			return 0
		}),
	)
	if s.opts.DataUsage != nil {
		m.reg.MustRegister(kvCollector{s, prometheus.NewDesc("berm_kv_bytes",
			"Bytes of a program's key-value data as its quota charges them (whole blocks per entry), by program.",
			[]string{"program"}, nil)})
	}
	return m
}

// kvCollector reads each served program's key-value bytes at scrape time,
// from the count the store keeps (it scans a program's directory only when
// another process wrote to it since).
type kvCollector struct {
	s    *Server
	desc *prometheus.Desc
}

func (c kvCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c kvCollector) Collect(ch chan<- prometheus.Metric) {
	c.s.mu.Lock()
	names := make([]string, 0, len(c.s.tools))
	for name := range c.s.tools {
		names = append(names, name)
	}
	c.s.mu.Unlock()
	for _, name := range names {
		n, err := c.s.opts.DataUsage(name)
		if err != nil {
			// One program's unreadable data costs only its series.
			c.s.log.Warn("metrics: key-value bytes", "program", name, "error", err)
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), name)
	}
}

// enableMetrics starts recording metrics, once, and returns them.
func (s *Server) enableMetrics() *metrics {
	s.metricsOnce.Do(func() { s.metrics.Store(newMetrics(s)) })
	return s.metrics.Load()
}

// metricsHandler serves the server's metrics in the Prometheus formats.
func (s *Server) metricsHandler() http.Handler {
	m := s.enableMetrics()
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// observeCall records one call's outcome, duration and bytes, when metrics
// are on.
func (s *Server) observeCall(program, tool string, d time.Duration, args []byte, out runtime.Outcome, err error) {
	m := s.metrics.Load()
	if m == nil {
		return
	}
	m.calls.WithLabelValues(program, tool, outcome(out, err)).Inc()
	m.duration.WithLabelValues(program, tool).Observe(d.Seconds())
	m.argsBytes.WithLabelValues(program).Add(float64(len(args)))
	m.resultBytes.WithLabelValues(program).Add(float64(len(out.Result) + len(out.Failure)))
}

// ObserveCompile records a compile: it is runtime.Observer.Compile of the
// server's runtime, wired only where metrics are wanted, and it turns them
// on, so that the compiles of Start, before /metrics is served, count.
func (s *Server) ObserveCompile(d time.Duration, cache runtime.CacheResult) {
	m := s.enableMetrics()
	m.compile.Observe(d.Seconds())
	if cache != runtime.CacheNone {
		m.cache.WithLabelValues(string(cache)).Inc()
	}
}

// ObserveInstantiate records an instantiation: it is
// runtime.Observer.Instantiate of the server's runtime.
func (s *Server) ObserveInstantiate(program string, d time.Duration) {
	if m := s.metrics.Load(); m != nil {
		m.instantiate.WithLabelValues(program).Observe(d.Seconds())
	}
}

// observeApply records one change of deployments: a program removed (when
// removed is not empty) loses its series.
func (s *Server) observeApply(removed string) {
	s.listChanged.Add(1)
	m := s.metrics.Load()
	if m == nil || removed == "" {
		return
	}
	for _, v := range []*prometheus.MetricVec{m.calls.MetricVec, m.duration.MetricVec, m.argsBytes.MetricVec, m.resultBytes.MetricVec, m.instantiate.MetricVec} {
		v.DeletePartialMatch(prometheus.Labels{"program": removed})
	}
}

// outcome names a call's outcome as toolResult maps it, in /metrics and in
// the call's log line alike.
func outcome(out runtime.Outcome, err error) string {
	switch {
	case errors.Is(err, runtime.ErrArguments):
		return "refused"
	case errors.Is(err, runtime.ErrTrap):
		return "trap"
	case errors.Is(err, runtime.ErrDeadline):
		return "deadline"
	case errors.Is(err, runtime.ErrLimit):
		return "limit"
	case err != nil:
		return "error"
	case out.Failed:
		return "failure"
	}
	return "result"
}
