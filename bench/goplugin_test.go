//go:build unix

package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn"
	"github.com/grpc-respawn/respawn/goplugin"
	"github.com/grpc-respawn/respawn/health"
	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/goplugintest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/internal/timeline"
	"github.com/grpc-respawn/respawn/redial"
)

// BenchmarkRecoveryGoPlugin is BenchmarkRecovery for the go-plugin hook,
// with and without AutoMTLS: SIGKILL, then one Get through a stub
// dispensed once, timed to its success; with strategy=standby the kill is
// answered by a spare.
func BenchmarkRecoveryGoPlugin(b *testing.B) {
	for _, mtls := range []bool{false, true} {
		for _, strategy := range []string{"respawn", "standby"} {
			b.Run(fmt.Sprintf("mtls=%v/strategy=%s", mtls, strategy), func(b *testing.B) {
				benchRecoveryGoPlugin(b, mtls, strategy == "standby")
			})
		}
	}
}

func benchRecoveryGoPlugin(b *testing.B, mtls, standby bool) {
	bin := goplugintest.BuildOnce(b)
	journal := filepath.Join(b.TempDir(), "journal")
	spares := 0
	if standby {
		spares = 1
	}
	w := newSpareWaiter()
	rc, client := connectGoPlugin(b, func() *plugin.ClientConfig {
		cfg := goplugintest.Config(bin, journal)
		cfg.AutoMTLS = mtls
		return cfg
	}, respawn.WithHealth(health.Config{Off: true}), respawn.WithConn(redial.WithPacing(redial.Pacing{LaunchRate: 1e6, LaunchBurst: 1e6}),
		redial.WithPacing(redial.Pacing{Spares: spares}), redial.WithEventHandler(w.handle)))
	ds := make([]time.Duration, 0, b.N)
	if standby {
		w.wait(b) // the spare for the first kill
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := rc.Current().Process()
		began := time.Now()
		if !killProcess(p) {
			b.Fatalf("plugin pid %d was already gone", p.PID)
		}
		if err := get(client); err != nil {
			b.Fatalf("first call after the kill: %v", err)
		}
		ds = append(ds, time.Since(began))
		if standby {
			w.wait(b) // the next spare, timed: see benchRecoveryStandby
		}
	}
	b.StopTimer()
	reportPercentiles(b, ds, "recovery-ms")
	if standby {
		s := rc.Stats()
		if s.SparesTaken != uint64(b.N) {
			b.Errorf("%d spares taken for %d kills (%d missing)", s.SparesTaken, b.N, s.SparesMissing)
		}
		b.ReportMetric(float64(s.SparesWasted)/float64(b.N), "spares-wasted/kill")
	}
}

// BenchmarkChaosGoPlugin is BenchmarkChaos for the go-plugin hook: writers
// that call Append (not idempotent; Put is declared idempotent in the test
// proto) in a loop through a stub dispensed once, from a goplugin.Connect
// Conn with its defaults, while the plugin is SIGKILLed every 200ms.
// strategy=ledger adds interceptor.WithLedger; the plugin keeps a ledger
// in its GRPCServer func when its host gives it one.
func BenchmarkChaosGoPlugin(b *testing.B) {
	for _, strategy := range []string{"respawn", "ledger"} {
		b.Run(fmt.Sprintf("strategy=%s/callers=4", strategy), func(b *testing.B) {
			benchChaosGoPlugin(b, strategy, 4)
		})
	}
}

func benchChaosGoPlugin(b *testing.B, strategy string, callers int) {
	var tl *timeline.Timeline
	path := timelinePath(b.Name())
	if path != "" {
		tl = timeline.New(fmt.Sprintf("go-plugin %s: %d writers, SIGKILL every %v", strategy, callers, killEvery))
	}
	bin := goplugintest.BuildOnce(b)
	journal := filepath.Join(b.TempDir(), "journal")
	opts := []respawn.Option{respawn.WithConn(redial.WithEventHandler(func(e redial.Event) {
		if tl != nil && e.Kind == redial.EventRespawnDone && e.Err == nil && e.Generation > 1 {
			tl.Mark(e.Time, timeline.Respawn)
		}
	}))}
	if strategy == "ledger" {
		opts = append(opts, respawn.WithCalls(interceptor.WithLedger()))
	}
	rc, client := connectGoPlugin(b, func() *plugin.ClientConfig { return goplugintest.Config(bin, journal) }, opts...)
	t := chaosTarget{
		append: func(ctx context.Context, id string) error {
			_, err := client.Append(ctx, &testpb.AppendRequest{Id: id})
			return err
		},
		journal:  journal,
		process:  func() *redial.Process { return rc.Current().Process() },
		respawns: func() int64 { return int64(rc.Stats().Respawns) },
	}
	runChaos(b, t, chaosRun{callers: callers, appendEvery: 1, tl: tl, logOthers: strategy == "ledger"})
	if tl != nil {
		tl.Stop()
		writeTimeline(b, tl, path)
	}
}

// connectGoPlugin connects to the go-plugin test plugin with config and
// opts, dispenses its client once and makes a first call, outside the
// timer; the Conn is closed when b ends.
func connectGoPlugin(b *testing.B, config func() *plugin.ClientConfig, opts ...respawn.Option) (*goplugin.Conn, testpb.TestClient) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, err := goplugin.Connect(ctx, goplugin.Config{Client: config}, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rc.Close() })
	raw, err := rc.Dispense(ctx, goplugintest.Name)
	if err != nil {
		b.Fatalf("Dispense: %v", err)
	}
	client := raw.(testpb.TestClient)
	if err := get(client); err != nil {
		b.Fatal(err)
	}
	return rc, client
}
