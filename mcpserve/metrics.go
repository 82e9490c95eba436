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
// only labels are program names (bounded by deployments) and tool names
// (bounded by manifests); a removed program's series are deleted.
type metrics struct {
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec   // program, tool, outcome
	duration *prometheus.HistogramVec // program, tool
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
	}
	m.reg.MustRegister(m.calls, m.duration,
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
			Name: "berm_deployments",
			Help: "Programs served.",
		}, func() float64 { return float64(s.programCount()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "berm_mcp_sessions",
			Help: "MCP sessions open.",
		}, func() float64 { return float64(s.sessions()) }),
	)
	return m
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

// observeCall records one call's outcome and duration, when metrics are on.
func (s *Server) observeCall(program, tool string, d time.Duration, out runtime.Outcome, err error) {
	m := s.metrics.Load()
	if m == nil {
		return
	}
	m.calls.WithLabelValues(program, tool, outcome(out, err)).Inc()
	m.duration.WithLabelValues(program, tool).Observe(d.Seconds())
}

// observeApply records one change of deployments: a program removed (when
// removed is not empty) loses its series.
func (s *Server) observeApply(removed string) {
	s.listChanged.Add(1)
	m := s.metrics.Load()
	if m == nil || removed == "" {
		return
	}
	m.calls.DeletePartialMatch(prometheus.Labels{"program": removed})
	m.duration.DeletePartialMatch(prometheus.Labels{"program": removed})
}

// outcome names a call's outcome as toolResult maps it.
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
