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
// test plugin keeps a ledger when its host gives it one; with
// strategy=ledger-resolve its ledger also has a resolver for Append, which
// tells from the plugin's journal whether an Append interrupted in its
// handler took effect, and runs it now if not. With
// RESPAWN_TIMELINE=path.svg it draws each run's timeline to
// path-strategy-S-callers-N.svg.
func BenchmarkChaos(b *testing.B) {
	for _, strategy := range []string{"respawn", "ledger", "ledger-resolve", "standby", "velero"} {
		for _, callers := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("strategy=%s/callers=%d", strategy, callers), func(b *testing.B) {
				benchChaos(b, strategy, callers)
			})
		}
	}
}

// chaosTarget is a strategy under chaos.
type chaosTarget struct {
	get    func(ctx context.Context) error
	append func(ctx context.Context, id string) error
	// upload, nil for a strategy without Uploads.
	upload   func(ctx context.Context, id string, chunks int) error
	journal  string // where the plugins journal their Appends and Uploads
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
	case "respawn", "ledger", "ledger-resolve", "standby":
		var opts []interceptor.Option
		if withLedger(strategy) {
			opts = append(opts, interceptor.WithLedger())
		}
		policy := respawntest.StartFunc(func(h redial.Handle) redial.Binding {
			b := interceptor.New(opts...).Start(h)
			b.DialOptions = append(b.DialOptions, grpc.WithChainUnaryInterceptor(countAttempts))
			return b
		})
		spares := 0
		if strategy == "standby" {
			spares = 1
		}
		rc := started(b, func() (*redial.Conn, error) {
			hook := pluginCommand(b, journal)
			if strategy == "ledger-resolve" {
				hook.Args = append(hook.Args, "-ledger-resolve")
			}
			return redial.New(hook, redial.WithPolicy(policy), redial.WithPacing(redial.Pacing{Spares: spares}), redial.WithEventHandler(func(e redial.Event) {
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
			upload: func(ctx context.Context, id string, chunks int) error {
				return upload(ctx, client, id, chunks)
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
	runChaos(b, t, chaosRun{callers: callers, appendEvery: appendEvery, tl: tl, logOthers: withLedger(strategy)})
	if tl != nil {
		tl.Stop()
		writeTimeline(b, tl, path)
	}
}

// withLedger reports whether strategy keeps the plugins' ledgers.
func withLedger(strategy string) bool { return strings.HasPrefix(strategy, "ledger") }

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
		appends       = appendTally{name: "appends"}
		uploads       = appendTally{name: "uploads"}
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
				switch {
				case n%r.appendEvery == r.appendEvery-1:
					id := appendID(i, n)
					err = t.append(ctx, id)
					appends.add(id, err)
				case t.upload != nil && n%uploadEvery == uploadEvery/2-1:
					id := "u" + appendID(i, n)
					err = t.upload(ctx, id, uploadChunks(n))
					uploads.add(id, err)
				default:
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
	uploadsFailedBefore, uploadsInterruptedBefore := uploads.counts()
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
	if t.upload != nil {
		uploads.report(b, t.journal, kills, uploadsFailedBefore, uploadsInterruptedBefore, r.logOthers)
	}
}
