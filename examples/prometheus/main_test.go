package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/grpc-respawn/respawn/redial"
)

// TestMain makes the test binary the plugin when command.Hook execs it
// with pluginEnv set, as main does.
func TestMain(m *testing.M) {
	if os.Getenv(pluginEnv) == "1" {
		if err := servePlugin(); err != nil {
			os.Exit(1)
		}
		return
	}
	goleak.VerifyTestMain(m)
}

// TestScrapeAfterCrashes runs the demo with real plugin processes (one
// crashes in a call, its successor is SIGKILLed from outside) and scrapes
// /metrics over HTTP: the counters moved by what happened, with the plugin's
// name and the method's service and name as labels.
func TestScrapeAfterCrashes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := prometheus.NewRegistry()
	var out strings.Builder
	if err := demo(ctx, reg, &out); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	scraped := string(body)
	for _, want := range []string{
		`respawn_plugin_exits_total{plugin="who",reason="crashed"} 2`, // the crash in a call, the kill from outside
		`respawn_plugin_exits_total{plugin="who",reason="closed"} 1`,  // conn.Close
		`respawn_respawns_total{plugin="who",result="ok"} 2`,
		`respawn_respawn_duration_seconds_count{plugin="who"} 2`,
		`respawn_retries_total{grpc_method="Who",grpc_service="example.Plugin",plugin="who"} 1`, // the call the crash interrupted
		`respawn_generation{plugin="who"} 3`,
		`respawn_dropped_events_total{plugin="who"} 0`,
	} {
		if !strings.Contains(scraped, want+"\n") {
			t.Errorf("scrape lacks %s", want)
		}
	}
	for _, unwanted := range []string{`result="error"`, `reason="retired"`, "respawn_outcome_unknown_total{"} {
		if strings.Contains(scraped, unwanted) {
			t.Errorf("scrape has %s", unwanted)
		}
	}
	if t.Failed() {
		t.Logf("demo:\n%s\nscrape:\n%s", out.String(), scraped)
	}
}

// TestHandle: each event moves the counter it should and no other, with
// the labels it should.
func TestHandle(t *testing.T) {
	failed := errors.New("hook failed")
	tests := []struct {
		name  string
		event redial.Event
		want  func(m *Metrics) prometheus.Collector // the one series that moves by 1
	}{
		{"a crash", redial.Event{Kind: redial.EventExit, Plugin: "p", Exit: redial.Exit{Reason: redial.ExitCrashed}},
			func(m *Metrics) prometheus.Collector { return m.exits.WithLabelValues("p", "crashed") }},
		{"a retired plugin", redial.Event{Kind: redial.EventExit, Plugin: "p", Exit: redial.Exit{Reason: redial.ExitRetired}},
			func(m *Metrics) prometheus.Collector { return m.exits.WithLabelValues("p", "retired") }},
		{"a respawn", redial.Event{Kind: redial.EventRespawnDone, Plugin: "p", Generation: 2, Duration: time.Second},
			func(m *Metrics) prometheus.Collector { return m.respawns.WithLabelValues("p", "ok") }},
		{"a failed respawn", redial.Event{Kind: redial.EventRespawnDone, Plugin: "p", Generation: 2, Err: failed},
			func(m *Metrics) prometheus.Collector { return m.respawns.WithLabelValues("p", "error") }},
		{"a failed first launch", redial.Event{Kind: redial.EventRespawnDone, Plugin: "p", Generation: 1, Err: failed},
			func(m *Metrics) prometheus.Collector { return m.respawns.WithLabelValues("p", "error") }},
		{"a retry", redial.Event{Kind: redial.EventRetry, Plugin: "p", Method: "/a.B/C"},
			func(m *Metrics) prometheus.Collector { return m.retries.WithLabelValues("p", "a.B", "C") }},
		{"a retry of a method with no service", redial.Event{Kind: redial.EventRetry, Plugin: "p", Method: "C"},
			func(m *Metrics) prometheus.Collector { return m.retries.WithLabelValues("p", "unknown", "unknown") }},
		{"an outcome unknown", redial.Event{Kind: redial.EventOutcomeUnknown, Plugin: "p", Method: "/a.B/C"},
			func(m *Metrics) prometheus.Collector { return m.outcomeUnknown.WithLabelValues("p", "a.B", "C") }},
		{"a breaker opening", redial.Event{Kind: redial.EventBreaker, Plugin: "p", Err: failed},
			func(m *Metrics) prometheus.Collector { return m.breakerOpens.WithLabelValues("p") }},
		{"a hung plugin", redial.Event{Kind: redial.EventHung, Plugin: "p"},
			func(m *Metrics) prometheus.Collector { return m.hung.WithLabelValues("p") }},
		{"the first launch is not a respawn", redial.Event{Kind: redial.EventRespawnDone, Plugin: "p", Generation: 1}, nil},
		{"a respawn start counts nothing", redial.Event{Kind: redial.EventRespawnStart, Plugin: "p"}, nil},
		{"a breaker closing counts nothing", redial.Event{Kind: redial.EventBreaker, Plugin: "p"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m, err := NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			m.Handle(tt.event)
			wantSeries, wantDuration := 0, 0
			if tt.want != nil {
				wantSeries = 1
				if got := testutil.ToFloat64(tt.want(m)); got != 1 {
					t.Errorf("series = %v, want 1", got)
				}
				if tt.event.Kind == redial.EventRespawnDone {
					wantDuration = 1 // every respawn counted is timed
				}
			}
			if got := testutil.CollectAndCount(m.duration); got != wantDuration {
				t.Errorf("duration series = %d, want %d", got, wantDuration)
			}
			n, err := testutil.GatherAndCount(reg)
			if err != nil {
				t.Fatal(err)
			}
			wantSeries += wantDuration
			if n != wantSeries {
				t.Errorf("%d series, want %d", n, wantSeries)
			}
		})
	}
}

// TestNewMetricsTwice: registering twice with one registry is an error,
// not a panic.
func TestNewMetricsTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Error("second NewMetrics with the same registry: no error")
	}
}
