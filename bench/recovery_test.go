//go:build unix

package bench

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grpc-respawn/respawn"
	"github.com/grpc-respawn/respawn/health"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// BenchmarkRecovery measures, once per iteration, the time from SIGKILL of
// the plugin to the first successful call (Get), reported as p50 and p99 in
// milliseconds. ns/op is a whole iteration, whatever else it waits for (the
// floor's clean-up, the standby's next spare), with the timer running: a
// benchmark that stopped its timer around that work would size b.N from
// the recovery alone and run for minutes. The floor is what no strategy
// can beat: launching the plugin binary and making one call on a new
// client.
func BenchmarkRecovery(b *testing.B) {
	b.Run("strategy=floor", benchRecoveryFloor)
	if benchRecoveryTeardownFunc != nil {
		b.Run("strategy=teardown", benchRecoveryTeardownFunc)
	}
	b.Run("strategy=respawn", func(b *testing.B) { benchRecoveryRespawn(b, false) })
	b.Run("strategy=respawn-health", func(b *testing.B) { benchRecoveryRespawn(b, true) })
	b.Run("strategy=standby", benchRecoveryStandby)
	b.Run("strategy=velero", benchRecoveryVelero)
}

func benchRecoveryFloor(b *testing.B) {
	cmd := pluginCommand(b, "")
	ds := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer() // the plugin's build, the first time
	for i := 0; i < b.N; i++ {
		began := time.Now()
		ctx, cancel := callCtx()
		backend, err := cmd.Respawn(ctx, redial.Request{})
		if err != nil {
			cancel()
			b.Fatal(err)
		}
		cc, err := grpc.NewClient(backend.Target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err == nil {
			_, err = testpb.NewTestClient(cc).Get(ctx, &testpb.GetRequest{Key: "k"})
		}
		ds = append(ds, time.Since(began))
		cancel()

		if cc != nil {
			_ = cc.Close()
		}
		_ = backend.Stop()
		if err != nil {
			b.Fatal(err)
		}
	}
	reportPercentiles(b, ds, "recovery-ms")
}

func benchRecoveryRespawn(b *testing.B, withHealth bool) {
	// The kills come back to back, faster than redial's launch-rate bound
	// (10/s sustained, burst 10) lets any plugin be replaced: lift it, or
	// this would measure the bound rather than one recovery.
	fast := redial.WithPacing(redial.Pacing{LaunchRate: 1e6, LaunchBurst: 1e6})
	rc := started(b, func() (*redial.Conn, error) {
		if withHealth {
			return respawn.New(pluginCommand(b, ""), respawn.WithConn(fast))
		}
		return respawn.New(pluginCommand(b, ""), respawn.WithConn(fast), respawn.WithHealth(health.Config{Off: true}))
	})
	defer rc.Close()
	client := testpb.NewTestClient(rc)
	ds := make([]time.Duration, 0, b.N)
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
	}
	b.StopTimer()
	if got, want := rc.Stats().Respawns, uint64(b.N); got != want {
		b.Errorf("%d respawns for %d kills", got, want)
	}
	reportPercentiles(b, ds, "recovery-ms")
}

func benchRecoveryVelero(b *testing.B) {
	v, err := newRestartable(pluginCommand(b, ""), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer v.Close()
	if err := veleroGet(v); err != nil {
		b.Fatal(err)
	}
	ds := make([]time.Duration, 0, b.N)
	failed := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := v.process()
		began := time.Now()
		if !killProcess(p) {
			b.Fatalf("plugin pid %d was already gone", p.PID)
		}
		// The caller retries its own failed call, at once, until it works.
		for veleroGet(v) != nil {
			failed++
			if time.Since(began) > 20*time.Second {
				b.Fatal("no successful call 20s after the kill")
			}
		}
		ds = append(ds, time.Since(began))
	}
	b.StopTimer()
	reportPercentiles(b, ds, "recovery-ms")
	b.ReportMetric(float64(failed)/float64(b.N), "failed-calls/kill")
}

func veleroGet(v *restartable) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := v.Get(ctx, &testpb.GetRequest{Key: "k"})
	return err
}
