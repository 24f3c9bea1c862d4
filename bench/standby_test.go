//go:build unix

package bench

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// atRest is how long a plugin rests before the recovery benchmarks that
// are set against teardown's floor kill it or call it cold: a plugin
// killed at rest takes longer to die, and a process at rest longer to
// answer, than one that has just served (a plugin killed right after a
// call was reaped in 0.5 ms, one at rest for 25 ms in 0.9; a cold call
// took 0.3 ms right after the health check, 0.7 after 25 ms; 2 vCPU VM),
// and a kill in production comes at any moment, a spare's usually long
// after it became ready. Both sides of the comparison rest alike.
const atRest = 25 * time.Millisecond

// spareWaiter counts the spares that became ready, for a benchmark to wait
// until the pool is full again before the next kill.
type spareWaiter struct {
	ready chan struct{}
}

func newSpareWaiter() *spareWaiter { return &spareWaiter{ready: make(chan struct{}, 1024)} }

func (w *spareWaiter) handle(e redial.Event) {
	if e.Kind == redial.EventStandby && e.Err == nil { // a spare ready
		w.ready <- struct{}{}
	}
}

// wait waits up to 20s for one more spare to be ready.
func (w *spareWaiter) wait(b *testing.B) {
	t := time.NewTimer(20 * time.Second)
	defer t.Stop()
	select {
	case <-w.ready:
	case <-t.C:
		b.Fatal("no spare ready within 20s")
	}
}

// benchRecoveryStandby is benchRecoveryRespawn with one spare: each kill
// is answered by a spare promoted in its place. The kill comes once the
// spare has been ready for [atRest], as a spare waits for a kill, and the
// killed plugin has been at rest as long or longer (the previous
// iteration's spare launch), as teardown's floor is measured. An iteration
// ends when the next spare is ready, with the timer running: ns/op is the
// whole cycle (the rest, the kill, the recovery and a spare's launch), so
// b.N is sized from what an iteration costs; the recovery alone is
// p50/p99-recovery-ms. The first spare is waited for before the timer
// starts, so every iteration is alike.
func benchRecoveryStandby(b *testing.B) {
	w := newSpareWaiter()
	rc := newRespawn(b, pluginCommand(b, ""), redial.WithPacing(redial.Pacing{LaunchRate: 1e6, LaunchBurst: 1e6}), redial.WithPacing(redial.Pacing{Spares: 1}), redial.WithEventHandler(w.handle))
	defer rc.Close()
	client := testpb.NewTestClient(rc)
	ds := make([]time.Duration, 0, b.N)
	w.wait(b) // the spare for the first kill
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		time.Sleep(atRest)
		p := rc.Current().Process()
		began := time.Now()
		if !killProcess(p) {
			b.Fatalf("plugin pid %d was already gone", p.PID)
		}
		if err := get(client); err != nil {
			b.Fatalf("first call after the kill: %v", err)
		}
		ds = append(ds, time.Since(began))
		w.wait(b) // the spare for the next kill
	}
	b.StopTimer()
	s := rc.Stats()
	if s.SparesTaken != uint64(b.N) {
		b.Errorf("%d spares taken for %d kills (%d missing)", s.SparesTaken, b.N, s.SparesMissing)
	}
	reportPercentiles(b, ds, "recovery-ms")
	b.ReportMetric(float64(s.SparesWasted)/float64(b.N), "spares-wasted/kill")
}

// BenchmarkRotate rotates the plugin once per iteration while 16 callers
// call Append (not idempotent) in a loop: p50/p99-rotate-ms is the time of
// one Rotate (launch or promotion, and swap); failed-calls must be 0 and
// every acknowledged Append must be in the journal exactly once (checked).
// With a spare, an iteration ends when the next spare is ready, with the
// timer running: ns/op is the whole cycle, so b.N is sized from what an
// iteration costs (a launch), not from a promotion of 0.1ms.
func BenchmarkRotate(b *testing.B) {
	for _, standby := range []int{0, 1} {
		b.Run(fmt.Sprintf("standby=%d/callers=16", standby), func(b *testing.B) { benchRotate(b, standby, 16) })
	}
}

func benchRotate(b *testing.B, standby, callers int) {
	journal := filepath.Join(b.TempDir(), "journal")
	w := newSpareWaiter()
	rc := newRespawn(b, pluginCommand(b, journal), redial.WithPacing(redial.Pacing{LaunchRate: 1e6, LaunchBurst: 1e6}), redial.WithPacing(redial.Pacing{GracePeriod: 50 * time.Millisecond}),
		redial.WithPacing(redial.Pacing{Spares: standby}), redial.WithEventHandler(w.handle))
	defer rc.Close()
	client := testpb.NewTestClient(rc)

	var (
		stop   atomic.Bool
		wg     sync.WaitGroup
		mu     sync.Mutex
		acked  []string
		failed atomic.Int64
	)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				id := fmt.Sprintf("c%d-%d", i, n)
				ctx, cancel := callCtx()
				_, err := client.Append(ctx, &testpb.AppendRequest{Id: id, DelayMs: int64(n % 3)})
				cancel()
				if err != nil {
					failed.Add(1)
					continue
				}
				mu.Lock()
				acked = append(acked, id)
				mu.Unlock()
			}
		}()
	}
	ds := make([]time.Duration, 0, b.N)
	for range standby {
		w.wait(b) // the spares for the first rotation
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ctx, cancel := callCtx()
		began := time.Now()
		err := rc.Rotate(ctx)
		ds = append(ds, time.Since(began))
		cancel()
		if err != nil {
			b.Fatalf("Rotate: %v", err)
		}
		if standby > 0 {
			w.wait(b) // the spare that replaces the promoted one
		}
	}
	b.StopTimer()
	stop.Store(true)
	wg.Wait()
	j, err := plugintest.ReadJournal(journal)
	if err != nil {
		b.Fatal(err)
	}
	wrong := 0
	ackedSet := make(map[string]bool, len(acked))
	for _, id := range acked {
		ackedSet[id] = true
		if j[id] != 1 {
			wrong++
		}
	}
	for id := range j {
		if !ackedSet[id] {
			wrong++ // executed, but its caller saw a failure
		}
	}
	if wrong != 0 {
		b.Errorf("%d Appends not exactly once (journal %d ids, %d acknowledged)", wrong, len(j), len(acked))
	}
	reportPercentiles(b, ds, "rotate-ms")
	b.ReportMetric(float64(failed.Load()), "failed-calls")
	b.ReportMetric(float64(len(acked))/float64(b.N), "calls/rotation")
}
