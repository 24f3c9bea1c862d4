package goplugin_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// TestChaos SIGKILLs the plugin every 300ms while 16 goroutines call a stub
// dispensed once, from the first client.
func TestChaos(t *testing.T) {
	for _, tc := range []struct {
		name string
		mtls bool
	}{
		{"plain", false},
		{"AutoMTLS", true},
	} {
		t.Run(tc.name, func(t *testing.T) { chaos(t, tc.mtls) })
	}
}

const (
	chaosCallers  = 16
	chaosDuration = 3 * time.Second
	chaosEvery    = 300 * time.Millisecond
	chaosMinLife  = 100 * time.Millisecond
)

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func chaos(t *testing.T, mtls bool) {
	baseline := goleak.IgnoreCurrent()
	h := newHost(t, setup{mtls: mtls})
	ctx := respawntest.Context(t, 60*time.Second)

	var (
		calls, failures, unknown atomic.Int64
		mu                       sync.Mutex
		acked                    []string
		unexpected               []error
		rec                      = recovery{recovered: make(chan struct{}, 1)}
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range chaosCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				pid, id, err := call(ctx, h.client, i, n)
				calls.Add(1)
				switch {
				case err == nil:
					rec.success(pid, time.Now())
					if id != "" {
						mu.Lock()
						acked = append(acked, id)
						mu.Unlock()
					}
				case id != "" && errors.Is(err, interceptor.ErrOutcomeUnknown):
					unknown.Add(1)
				default:
					failures.Add(1)
					mu.Lock()
					unexpected = append(unexpected, err)
					mu.Unlock()
				}
			}
		}()
	}

	// Each plugin dies chaosEvery after the previous one, but not before it
	// has served calls for chaosMinLife: where a launch takes longer than
	// chaosEvery (AutoMTLS generates keys on both sides, slow under -race),
	// killing each plugin as soon as it is up would be a crash loop, where
	// a call rightly runs out of attempts, not the chaos measured here.
	kills := 0
	var last uint64
	end := time.Now().Add(chaosDuration)
	for next := time.Now(); next.Before(end); {
		if kills > 0 {
			rec.waitRecovered(t, ctx)
			next = later(next, time.Now().Add(chaosMinLife))
		}
		if d := time.Until(next); d > 0 {
			timer := time.NewTimer(d)
			<-timer.C
		}
		g := h.waitGeneration(t, last+1) // never kill a plugin twice
		last = g.Number()
		p := g.Process()
		next = time.Now().Add(chaosEvery)
		rec.killed(int64(p.PID), time.Now())
		respawntest.Kill(t, g)
		kills++
	}
	close(stop)
	wg.Wait()

	// One more call replaces the plugin killed last, and shows that the
	// connection it reaches is still authenticated by go-plugin's mTLS.
	var pr peer.Peer
	if _, err := h.client.Get(ctx, &testpb.GetRequest{}, grpc.Peer(&pr)); err != nil {
		t.Fatalf("Get after the chaos: %v", err)
	}
	if _, isTLS := pr.AuthInfo.(credentials.TLSInfo); isTLS != mtls {
		t.Errorf("after %d respawns the peer's AuthInfo is %T; want TLS: %v", kills, pr.AuthInfo, mtls)
	}

	st := h.rc.Stats()
	if failures.Load() != 0 {
		t.Errorf("%d calls failed, want 0; first errors: %v", failures.Load(), unexpected[:min(3, len(unexpected))])
	}
	if st.Respawns != uint64(kills) {
		t.Errorf("respawns = %d, kills = %d: want one respawn per kill", st.Respawns, kills)
	}
	journal := h.journalCounts(t)
	for id, n := range journal {
		if n > 1 {
			t.Errorf("Append %s ran %d times, want at most 1", id, n)
		}
	}
	for _, id := range acked {
		if journal[id] != 1 {
			t.Errorf("Append %s succeeded but ran %d times", id, journal[id])
		}
	}
	p50, p99 := rec.percentiles()
	t.Logf("calls %d, failures %d, outcome unknown (Append) %d, kills %d, respawns %d, failed respawns %d, retries %d; recovery (kill to first success on the new plugin) over %d kills: p50 %v, p99 %v; launch (hook+dial+ready) p50 %v",
		calls.Load(), failures.Load(), unknown.Load(), kills, st.Respawns, st.FailedRespawns, st.Retries, rec.count(), p50, p99, launchMedian(h.events.All()))

	if err := h.rc.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, baseline)
}

// call makes caller i's n-th call: a Get, a Put (both idempotent) or an
// Append with a unique id (not idempotent), which it returns.
func call(ctx context.Context, c testpb.TestClient, i, n int) (pid int64, appendID string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	key := fmt.Sprintf("k%d", i)
	switch n % 3 {
	case 0:
		r, err := c.Get(ctx, &testpb.GetRequest{Key: key})
		return r.GetPid(), "", err
	case 1:
		r, err := c.Put(ctx, &testpb.PutRequest{Key: key, Value: "v"})
		return r.GetPid(), "", err
	default:
		id := fmt.Sprintf("c%d-%d", i, n)
		r, err := c.Append(ctx, &testpb.AppendRequest{Id: id})
		return r.GetPid(), id, err
	}
}

// recovery measures, per kill, the time until a call first succeeds on
// another plugin.
type recovery struct {
	recovered chan struct{} // gets a value when a call first succeeds after a kill

	mu       sync.Mutex
	pid      int64 // the plugin killed last
	at       time.Time
	pending  bool
	recovers []time.Duration
}

func (r *recovery) killed(pid int64, at time.Time) {
	r.mu.Lock()
	r.pid, r.at, r.pending = pid, at, true
	r.mu.Unlock()
}

func (r *recovery) success(pid int64, at time.Time) {
	r.mu.Lock()
	if r.pending && pid != r.pid && at.After(r.at) {
		r.recovers = append(r.recovers, at.Sub(r.at))
		r.pending = false
		r.recovered <- struct{}{} // at most one per kill: never blocks
	}
	r.mu.Unlock()
}

// waitRecovered waits until a call has succeeded after the last kill.
func (r *recovery) waitRecovered(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-r.recovered:
	case <-ctx.Done():
		t.Fatal("no call succeeded after the last kill")
	}
}

func (r *recovery) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.recovers)
}

func (r *recovery) percentiles() (p50, p99 time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.recovers) == 0 {
		return 0, 0
	}
	s := slices.Clone(r.recovers)
	slices.Sort(s)
	return s[len(s)*50/100], s[min(len(s)-1, len(s)*99/100)]
}
