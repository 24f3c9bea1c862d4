//go:build unix

package health_test

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/health"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// BenchmarkDetection measures the lag from a plugin's death (SIGKILL),
// stop (SIGSTOP) or deadlock to the start of its respawn, as stamped on
// redial.EventRespawnStart. ns/op is the whole cycle: detection, respawn and
// one call on the new plugin. The "defaults" case
// passes the zero Config: it measures the bound the package documents. A
// deadlocked plugin (testplugin -hung-health: its health checks never
// return, its transport answers) is deadlocked from its start: its lag
// runs from the end of its own respawn.
func BenchmarkDetection(b *testing.B) {
	settings := []struct{ interval, timeout time.Duration }{
		{}, // the defaults
		{100 * time.Millisecond, 100 * time.Millisecond},
		{50 * time.Millisecond, 25 * time.Millisecond},
	}
	const failures = 3
	for _, cause := range []struct {
		name string
		sig  syscall.Signal
	}{{"kill", syscall.SIGKILL}, {"stop", syscall.SIGSTOP}, {"deadlock", 0}} {
		for _, s := range settings {
			name := fmt.Sprintf("cause=%s/interval=%v/timeout=%v/failures=%d", cause.name, s.interval, s.timeout, failures)
			var cfg health.Config
			if s.interval == 0 {
				name = "cause=" + cause.name + "/defaults"
			} else {
				cfg = health.Config{Interval: s.interval, Timeout: s.timeout, Failures: failures}
			}
			b.Run(name, func(b *testing.B) {
				// The kills come back to back, faster than redial's
				// launch-rate bound (10/s, burst 10) lets a plugin be
				// replaced: lift it, or from the 11th kill on the lag
				// measured would be the wait for a launch token.
				ropts := []redial.Option{redial.WithPacing(redial.Pacing{LaunchRate: 1e6, LaunchBurst: 1e6})}
				var args []string
				if cause.sig == 0 {
					args = []string{"-hung-health"}
				}
				h := newHost(b, args, ropts, cfg)
				defer h.stop()
				lags := make([]time.Duration, 0, b.N)
				for b.Loop() {
					lags = append(lags, h.detect(b, cause.sig))
				}
				slices.Sort(lags)
				b.ReportMetric(ms(percentile(lags, 50)), "p50-"+cause.name+"-lag-ms")
				b.ReportMetric(ms(percentile(lags, 99)), "p99-"+cause.name+"-lag-ms")
			})
		}
	}
}

// detect signals the current plugin (sig 0: none, it is deadlocked from
// its start) and returns the time until its respawn started. Before returning it makes a call on the new plugin, so that the
// next kill follows a plugin that served calls and redial respawns it at
// once rather than backing off.
func (h *host) detect(b *testing.B, sig syscall.Signal) time.Duration {
	g := h.rc.Current()
	ctx := respawntest.Context(b, 30*time.Second)
	var began time.Time
	switch sig {
	case 0: // deadlocked from its start
		began = h.events.Wait(b, redial.EventRespawnDone, g.Number(), 1).Time
	case syscall.SIGSTOP:
		stop(b, g.Process().PID)
		began = time.Now() // from the moment the plugin is actually stopped
	default:
		began = time.Now()
		if err := syscall.Kill(g.Process().PID, sig); err != nil {
			b.Fatal(err)
		}
	}
	next := g.Number() + 1
	start := h.events.Wait(b, redial.EventRespawnStart, next, 1)
	done := h.events.Wait(b, redial.EventRespawnDone, next, 1)
	if done.Err != nil {
		b.Fatalf("respawn: %v", done.Err)
	}
	if _, err := h.client.Get(ctx, &testpb.GetRequest{}); err != nil {
		b.Fatalf("Get on the new plugin: %v", err)
	}
	return start.Time.Sub(began)
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[(len(sorted)-1)*p/100]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
