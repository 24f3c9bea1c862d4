//go:build unix

package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/internal/timeline"
	"github.com/grpc-respawn/respawn/redial"
)

// killEvery is the chaos schedule: one SIGKILL per iteration, then this long
// for the strategy to recover and the callers to keep calling.
const killEvery = 200 * time.Millisecond

// appendEvery makes one call in this many of each chaos caller an Append
// (not idempotent, with an id of its own), the others Gets.
const appendEvery = 8

// BenchmarkChaos runs N callers that call in a loop, one call in 8 an
// Append and the others Get, each going on to its next call at once after
// a failure, while the plugin is SIGKILLed every 200ms (one kill per
// iteration, so the default -benchtime gives about 6 kills). It reports
// successful calls per second, failed calls (total for the run and per
// kill) and respawns per kill, and the Appends that failed per kill
// (all of them, those interrupted in their handler, and those that had
// run all the same) and, for the run, those run more than once or
// acknowledged but never run, according to the plugin's journal.
// strategy=ledger is strategy=respawn with interceptor.WithLedger: the
// test plugin keeps a ledger when its host gives it one. With
// RESPAWN_TIMELINE=path.svg it draws each run's timeline to
// path-strategy-S-callers-N.svg.
func BenchmarkChaos(b *testing.B) {
	for _, strategy := range []string{"respawn", "ledger", "standby", "velero"} {
		for _, callers := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("strategy=%s/callers=%d", strategy, callers), func(b *testing.B) {
				benchChaos(b, strategy, callers)
			})
		}
	}
}

// chaosTarget is a strategy under chaos.
type chaosTarget struct {
	get      func(ctx context.Context) error
	append   func(ctx context.Context, id string) error
	journal  string // where the plugins journal their Appends
	process  func() *redial.Process
	respawns func() int64
	wasted   func() int64 // spares discarded (standby), nil for the others
	close    func()
}

type attemptsKey struct{}

// countAttempts is installed inside respawn's interceptor, so it sees each
// attempt of a call, and counts them in the call's ctx.
func countAttempts(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if n, ok := ctx.Value(attemptsKey{}).(*atomic.Int32); ok {
		n.Add(1)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func newChaosTarget(b *testing.B, strategy string, tl *timeline.Timeline) chaosTarget {
	onRespawn := func(at time.Time) {
		if tl != nil {
			tl.Mark(at, timeline.Respawn)
		}
	}
	journal := filepath.Join(b.TempDir(), "journal")
	req := &testpb.GetRequest{Key: "k"}
	switch strategy {
	case "respawn", "ledger", "standby":
		var opts []interceptor.Option
		if strategy == "ledger" {
			opts = append(opts, interceptor.WithLedger())
		}
		policy := respawntest.PolicyFunc(func(h redial.Handle) []grpc.DialOption {
			return append(interceptor.New(opts...).DialOptions(h), grpc.WithChainUnaryInterceptor(countAttempts))
		})
		spares := 0
		if strategy == "standby" {
			spares = 1
		}
		rc := started(b, func() (*redial.Conn, error) {
			return redial.New(pluginCommand(b, journal), redial.WithPolicy(policy), redial.WithPacing(redial.Pacing{Spares: spares}), redial.WithEventHandler(func(e redial.Event) {
				if e.Kind == redial.EventRespawnDone && e.Err == nil && e.Generation > 1 {
					onRespawn(e.Time)
				}
			}))
		})
		client := testpb.NewTestClient(rc)
		var wasted func() int64
		if strategy == "standby" {
			wasted = func() int64 { return int64(rc.Stats().SparesWasted) }
		}
		return chaosTarget{
			get: func(ctx context.Context) error {
				_, err := client.Get(ctx, req)
				return err
			},
			append: func(ctx context.Context, id string) error {
				_, err := client.Append(ctx, &testpb.AppendRequest{Id: id})
				return err
			},
			journal:  journal,
			process:  func() *redial.Process { return rc.Current().Process() },
			respawns: func() int64 { return int64(rc.Stats().Respawns) },
			wasted:   wasted,
			close:    func() { _ = rc.Close() },
		}
	case "velero":
		v, err := newRestartable(pluginCommand(b, journal), onRespawn)
		if err != nil {
			b.Fatal(err)
		}
		return chaosTarget{
			get: func(ctx context.Context) error {
				_, err := v.Get(ctx, req)
				return err
			},
			append: func(ctx context.Context, id string) error {
				_, err := v.Append(ctx, &testpb.AppendRequest{Id: id})
				return err
			},
			journal:  journal,
			process:  v.process,
			respawns: v.relaunches.Load,
			close:    v.Close,
		}
	}
	b.Fatalf("unknown strategy %q", strategy)
	return chaosTarget{}
}

func benchChaos(b *testing.B, strategy string, callers int) {
	var tl *timeline.Timeline
	path := timelinePath(b.Name())
	if path != "" {
		tl = timeline.New(fmt.Sprintf("%s: %d callers, SIGKILL every %v", strategy, callers, killEvery))
	}
	t := newChaosTarget(b, strategy, tl)
	defer t.close()
	runChaos(b, t, chaosRun{callers: callers, appendEvery: appendEvery, tl: tl, logOthers: strategy == "ledger"})
	if tl != nil {
		tl.Stop()
		writeTimeline(b, tl, path)
	}
}

// chaosRun says how the callers of a chaos benchmark call.
type chaosRun struct {
	callers     int
	appendEvery int                // one call in appendEvery of each caller is an Append
	tl          *timeline.Timeline // nil: no timeline
	logOthers   bool               // log the Appends that failed other than interrupted
}

// runChaos runs r.callers callers against t, SIGKILLs t's plugin every
// killEvery, once per iteration, and reports the metrics.
func runChaos(b *testing.B, t chaosTarget, r chaosRun) {
	var (
		stop          atomic.Bool
		ok, failed    atomic.Int64
		appends       appendTally
		ready, done   sync.WaitGroup
		base, cancel0 = context.WithCancel(context.Background())
	)
	defer cancel0()
	ready.Add(r.callers)
	done.Add(r.callers)
	for i := range r.callers {
		go func() {
			defer done.Done()
			first, prevFailed := true, false
			for n := 0; !stop.Load(); n++ {
				var attempts atomic.Int32
				ctx, cancel := context.WithTimeout(context.WithValue(base, attemptsKey{}, &attempts), 20*time.Second)
				began := time.Now()
				var err error
				if n%r.appendEvery == r.appendEvery-1 {
					id := appendID(i, n)
					err = t.append(ctx, id)
					appends.add(id, err)
				} else {
					err = t.get(ctx)
				}
				cancel()
				outcome := timeline.OK
				switch {
				case err != nil:
					outcome = timeline.Failed
					failed.Add(1)
				case prevFailed || attempts.Load() > 1:
					outcome = timeline.Retried
					ok.Add(1)
				default:
					ok.Add(1)
				}
				prevFailed = err != nil
				if r.tl != nil {
					r.tl.Call(began, outcome)
				}
				if first && err == nil {
					first = false
					ready.Done()
				}
			}
			if first {
				ready.Done()
			}
		}()
	}
	ready.Wait() // every caller is connected and calling
	okBefore, failedBefore, respawnsBefore := ok.Load(), failed.Load(), t.respawns()
	appendsFailedBefore, interruptedBefore := appends.counts()
	var wastedBefore int64
	if t.wasted != nil {
		wastedBefore = t.wasted()
	}

	b.ReportAllocs()
	b.ResetTimer()
	began := time.Now()
	kills := 0
	for i := 0; i < b.N; i++ {
		p := t.process()
		at := time.Now()
		if killProcess(p) {
			kills++
			if r.tl != nil {
				r.tl.Mark(at, timeline.Kill)
			}
		}
		time.Sleep(killEvery)
	}
	stop.Store(true)
	done.Wait()
	elapsed := time.Since(began)
	b.StopTimer()

	nOK, nFailed := ok.Load()-okBefore, failed.Load()-failedBefore
	b.ReportMetric(float64(nOK)/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(nFailed), "failed-calls")
	if kills > 0 {
		b.ReportMetric(float64(nFailed)/float64(kills), "failed-calls/kill")
		b.ReportMetric(float64(t.respawns()-respawnsBefore)/float64(kills), "respawns/kill")
		if t.wasted != nil {
			b.ReportMetric(float64(t.wasted()-wastedBefore)/float64(kills), "spares-wasted/kill")
		}
	}
	appends.report(b, t.journal, kills, appendsFailedBefore, interruptedBefore, r.logOthers)
}

// stormCallers is how many calls are in flight when the plugin dies.
const stormCallers = 64

// stormDelay is how long each Get sleeps in the plugin. Every call is in its
// handler when the plugin is killed, and a retried Get sleeps again on the
// new plugin, so ms-to-all-answered is at least this. It must outlast the
// time from the first of the calls reaching the plugin to the last (else
// the first are answered before the kill): 100ms did not at load 19 on 2
// cores.
const stormDelay = 500 * time.Millisecond

// BenchmarkStorm kills the plugin while 64 Gets are in its handlers, once per
// iteration, and reports how many respawns that caused (the target is
// exactly 1) and the time from the kill until all 64 callers had an answer.
func BenchmarkStorm(b *testing.B) {
	b.Run(fmt.Sprintf("callers=%d", stormCallers), func(b *testing.B) {
		journal := filepath.Join(b.TempDir(), "journal")
		rc := newRespawn(b, pluginCommand(b, journal))
		defer rc.Close()
		client := testpb.NewTestClient(rc)

		ds := make([]time.Duration, 0, b.N)
		var respawns uint64
		failed, early := 0, 0
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			prefix := fmt.Sprintf("storm%d-", i)
			type answer struct {
				pid int64
				err error
			}
			answers := make(chan answer, stormCallers)
			for j := range stormCallers {
				go func() {
					ctx, cancel := callCtx()
					defer cancel()
					resp, err := client.Get(ctx, &testpb.GetRequest{Id: fmt.Sprint(prefix, j), DelayMs: stormDelay.Milliseconds()})
					answers <- answer{resp.GetPid(), err}
				}()
			}
			waitInHandler(b, journal, prefix, stormCallers)

			before := rc.Stats().Respawns
			p := rc.Current().Process()
			began := time.Now()
			if !killProcess(p) {
				b.Fatal("plugin already gone before the kill")
			}
			for range stormCallers {
				switch a := <-answers; {
				case a.err != nil:
					failed++
				case a.pid == int64(p.PID):
					early++ // answered before the kill: not part of the storm
				}
			}
			ds = append(ds, time.Since(began))
			respawns += rc.Stats().Respawns - before
		}
		b.StopTimer()
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		b.ReportMetric(float64(sum)/float64(len(ds))/float64(time.Millisecond), "ms-to-all-answered")
		b.ReportMetric(float64(respawns)/float64(b.N), "respawns/kill")
		b.ReportMetric(float64(failed), "failed-calls")
		if early > 0 {
			b.Errorf("%d calls were answered before the kill: raise stormDelay", early)
		}
	})
}

// waitInHandler waits up to 20s until the journal shows n calls whose id
// starts with prefix: they are all in the plugin's handler.
func waitInHandler(b *testing.B, journal, prefix string, n int) {
	const limit = 20 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	got := 0
	err := plugintest.WaitJournal(ctx, journal, func(j map[string]int) bool {
		got = 0
		for id := range j {
			if strings.HasPrefix(id, prefix) {
				got++
			}
		}
		return got >= n
	})
	if err != nil {
		b.Fatalf("only %d of %d calls reached the plugin within %v: %v", got, n, limit, err)
	}
}
