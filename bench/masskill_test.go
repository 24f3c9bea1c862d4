//go:build unix

package bench

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// BenchmarkMassKill starts N Conns, each with its plugin and a health
// watcher, and SIGKILLs all N plugins at once per iteration, as the OOM
// kill of a whole pod would: it reports the time until all N serve a call
// again (p50 and p99 over the iterations), with and without one spare per
// Conn, the host's CPU time (user and system, getrusage(2)) from the kills
// until all serve, and the host's heap and goroutines per idle Conn with
// its watcher (and spare). The launch-rate bound is lifted, as in BenchmarkRecovery,
// since the kills come back to back. No benchmark here stops its timer:
// ns/op is a whole iteration (with spares, the wait for the N new ones
// too), so that b.N is sized from what an iteration costs.
func BenchmarkMassKill(b *testing.B) {
	for _, n := range []int{10, 50, 200} {
		b.Run(fmt.Sprintf("standby=teardown/plugins=%d", n), func(b *testing.B) { benchMassTeardown(b, n) })
	}
	for _, standby := range []int{0, 1} {
		for _, n := range []int{10, 50, 200} {
			b.Run(fmt.Sprintf("standby=%d/plugins=%d", standby, n), func(b *testing.B) { benchMassKill(b, n, standby) })
		}
	}
}

// benchMassTeardown is the floor of a mass kill: N idle plugins launched
// by command.Hook, without Conns, all SIGKILLed at once; the time until
// all N are reaped (their exits seen and reported) is what no recovery can
// beat, since each waits for its plugin's exit. ns/op is the whole
// iteration, the N launches included.
func benchMassTeardown(b *testing.B, n int) {
	cmd := pluginCommand(b, "")
	ds := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer() // the plugin's build, the first time
	for i := 0; i < b.N; i++ {
		bes := make([]redial.Backend, n)
		for j := range bes {
			ctx, cancel := callCtx()
			be, err := cmd.Respawn(ctx, redial.Request{})
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			bes[j] = be
		}
		began := time.Now()
		for _, be := range bes {
			if !killProcess(be.Process) {
				b.Fatalf("plugin pid %d was already gone", be.Process.PID)
			}
		}
		for _, be := range bes {
			<-be.Process.Done()
		}
		ds = append(ds, time.Since(began))
		for _, be := range bes {
			_ = be.Stop()
		}
	}
	reportPercentiles(b, ds, "all-reaped-ms")
}

type massConn struct {
	rc     *redial.Conn
	client testpb.TestClient
	spares *spareWaiter
}

func benchMassKill(b *testing.B, n, standby int) {
	heap0, gr0 := idleFootprint()
	conns := make([]massConn, n)
	cmd := pluginCommand(b, "") // one for all: one stderr log, not N, if it fails
	for i := range conns {
		sw := newSpareWaiter()
		rc := started(b, func() (*redial.Conn, error) {
			return respawn.New(cmd, respawn.WithConn(redial.WithPacing(redial.Pacing{LaunchRate: 1e6, LaunchBurst: 1e6}), redial.WithPacing(redial.Pacing{Spares: standby}), redial.WithEventHandler(sw.handle)))
		})
		conns[i] = massConn{rc: rc, client: testpb.NewTestClient(rc), spares: sw}
	}
	defer func() {
		var wg sync.WaitGroup
		for _, c := range conns {
			wg.Add(1)
			go func() { defer wg.Done(); _ = c.rc.Close() }()
		}
		wg.Wait()
	}()
	waitSpares := func() {
		for _, c := range conns {
			for range standby {
				c.spares.wait(b)
			}
		}
	}
	waitSpares()
	heap1, gr1 := idleFootprint()

	ds := make([]time.Duration, 0, b.N)
	exits := make([]time.Duration, 0, b.N) // until redial has reaped all N
	var cpu time.Duration                  // the host's, from the kills to all serving
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		procs := make([]*redial.Process, n)
		for j, c := range conns {
			procs[j] = c.rc.Current().Process()
		}
		cpu0 := processCPU(b)
		began := time.Now()
		for _, p := range procs {
			if !killProcess(p) {
				b.Fatalf("plugin pid %d was already gone", p.PID)
			}
		}
		exitedAll := make(chan time.Duration, 1)
		go func() {
			for _, p := range procs {
				<-p.Done()
			}
			exitedAll <- time.Since(began)
		}()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for _, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := get(c.client); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		ds = append(ds, time.Since(began))
		cpu += processCPU(b) - cpu0
		exits = append(exits, <-exitedAll)
		close(errs)
		for err := range errs {
			b.Fatalf("a call after the mass kill failed: %v", err)
		}
		waitSpares() // one spare each ready again, for the next kill
	}
	b.StopTimer()
	var missing, retries uint64
	for _, c := range conns {
		s := c.rc.Stats()
		missing += s.SparesMissing
		retries += s.Retries
	}
	if standby > 0 {
		b.ReportMetric(float64(missing)/float64(n*b.N), "spares-missing/kill")
	}
	b.ReportMetric(float64(retries)/float64(n*b.N), "retries/kill")
	b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(b.N), "host-cpu-ms/kill")
	reportPercentiles(b, ds, "all-serving-ms")
	reportPercentiles(b, exits, "all-reaped-ms")
	// As floats: a GC between the two samples can leave heap1 < heap0,
	// which as uint64 would wrap to an absurd figure instead of showing
	// a negative one.
	b.ReportMetric((float64(heap1)-float64(heap0))/float64(n)/1024, "heap-KiB/conn")
	b.ReportMetric(float64(gr1-gr0)/float64(n), "goroutines/conn")
}

// idleFootprint returns the live heap after a GC and the goroutine count.
func idleFootprint() (heap uint64, goroutines int) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, runtime.NumGoroutine()
}
