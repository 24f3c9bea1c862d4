package main

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/grpc-respawn/respawn/redial"
)

// Metrics turns redial's events into Prometheus metrics. One Metrics serves
// every Conn of a host: pass [Metrics.Handle] to each Conn's
// redial.WithEventHandler, and give each Conn a name (redial.WithName), which
// becomes the plugin label. Labels are low-cardinality: plugin, reason,
// result, grpc_service and grpc_method, never a pid, a generation or an
// error text. Its methods are safe for concurrent use.
type Metrics struct {
	exits          *prometheus.CounterVec   // plugin, reason
	respawns       *prometheus.CounterVec   // plugin, result
	duration       *prometheus.HistogramVec // plugin
	retries        *prometheus.CounterVec   // plugin, grpc_service, grpc_method
	outcomeUnknown *prometheus.CounterVec   // plugin, grpc_service, grpc_method
	breakerOpens   *prometheus.CounterVec   // plugin
	hung           *prometheus.CounterVec   // plugin
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	call := []string{"plugin", "grpc_service", "grpc_method"}
	m := &Metrics{
		exits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "respawn_plugin_exits_total",
			Help: "Plugin processes that exited, by reason: crashed (nobody in this host asked: a crash, an OOM kill, a signal from outside), retired, hung-killed, launch-abandoned, closed.",
		}, []string{"plugin", "reason"}),
		respawns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "respawn_respawns_total",
			Help: "Respawns that replaced a plugin (result ok), and launches that failed (result error), the first launch's failures included as in Stats().FailedRespawns; the first launch that succeeds is not counted.",
		}, []string{"plugin", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "respawn_respawn_duration_seconds",
			Help:    "How long respawns counted by respawn_respawns_total took, from start to a ready plugin or a failure.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"plugin"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "respawn_retries_total",
			Help: "Call attempts after the first, made because the plugin died.",
		}, call),
		outcomeUnknown: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "respawn_outcome_unknown_total",
			Help: "Calls that failed after they may have reached a dying plugin and were not retried (not idempotent).",
		}, call),
		breakerOpens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "respawn_breaker_opens_total",
			Help: "Times the crash-loop breaker opened.",
		}, []string{"plugin"}),
		hung: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "respawn_hung_total",
			Help: "Plugins found alive but not answering by health probes.",
		}, []string{"plugin"}),
	}
	for _, c := range []prometheus.Collector{m.exits, m.respawns, m.duration, m.retries, m.outcomeUnknown, m.breakerOpens, m.hung} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Handle records e; pass it to redial.WithEventHandler. Events are delivered
// asynchronously: those a full queue drops are counted by
// [StatsCollector]'s respawn_dropped_events_total.
func (m *Metrics) Handle(e redial.Event) {
	switch e.Kind {
	case redial.EventExit:
		m.exits.WithLabelValues(e.Plugin, string(e.Exit.Reason)).Inc()
	case redial.EventRespawnDone:
		result := "ok"
		switch {
		case e.Err != nil:
			result = "error"
		case e.Generation <= 1:
			return // the first launch, not a respawn
		}
		m.respawns.WithLabelValues(e.Plugin, result).Inc()
		m.duration.WithLabelValues(e.Plugin).Observe(e.Duration.Seconds())
	case redial.EventRetry:
		service, method := splitMethod(e.Method)
		m.retries.WithLabelValues(e.Plugin, service, method).Inc()
	case redial.EventOutcomeUnknown:
		service, method := splitMethod(e.Method)
		m.outcomeUnknown.WithLabelValues(e.Plugin, service, method).Inc()
	case redial.EventBreaker:
		if e.Err != nil { // opened; nil: closed
			m.breakerOpens.WithLabelValues(e.Plugin).Inc()
		}
	case redial.EventHung:
		m.hung.WithLabelValues(e.Plugin).Inc()
	}
}

// splitMethod splits "/pkg.Service/Method" as go-grpc-middleware does, with
// "unknown" for what is not a full method name.
func splitMethod(full string) (service, method string) {
	service, method, ok := strings.Cut(strings.TrimPrefix(full, "/"), "/")
	if !ok {
		return "unknown", "unknown"
	}
	return service, method
}

// StatsCollector exports what only a Conn's own counters know ([redial.Stats]):
// the current generation, and the events the handler never saw. It reads
// conn.Stats() at each scrape.
type StatsCollector struct {
	plugin     string
	conn       *redial.Conn
	generation *prometheus.Desc
	dropped    *prometheus.Desc
	panics     *prometheus.Desc
}

// NewStatsCollector returns a collector of conn's counters, labelled plugin
// (conn's name); register it with a prometheus.Registerer.
func NewStatsCollector(plugin string, conn *redial.Conn) *StatsCollector {
	labels := prometheus.Labels{"plugin": plugin}
	return &StatsCollector{
		plugin: plugin,
		conn:   conn,
		generation: prometheus.NewDesc("respawn_generation",
			"The current plugin's generation: 1 for the first launch, one more per respawn.", nil, labels),
		dropped: prometheus.NewDesc("respawn_dropped_events_total",
			"Events not delivered to the handler (its queue was full, or the Conn closed): the event-based counters miss them.", nil, labels),
		panics: prometheus.NewDesc("respawn_event_handler_panics_total",
			"Panics of the event handler, recovered.", nil, labels),
	}
}

// Describe implements prometheus.Collector.
func (s *StatsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.generation
	ch <- s.dropped
	ch <- s.panics
}

// Collect implements prometheus.Collector.
func (s *StatsCollector) Collect(ch chan<- prometheus.Metric) {
	st := s.conn.Stats()
	ch <- prometheus.MustNewConstMetric(s.generation, prometheus.GaugeValue, float64(st.CurrentGen))
	ch <- prometheus.MustNewConstMetric(s.dropped, prometheus.CounterValue, float64(st.DroppedEvents))
	ch <- prometheus.MustNewConstMetric(s.panics, prometheus.CounterValue, float64(st.HandlerPanics))
}
