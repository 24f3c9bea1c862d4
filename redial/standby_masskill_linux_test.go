package redial_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// TestStandbyMassKill SIGKILLs every process of 20 Conns with Pacing{Spares: 1}
// at once, each Conn's plugin and its spare, as the OOM kill of a cgroup
// does: first with an idempotent Get in each plugin's handler, then three
// more times with the fleet idle. The spares are signalled first, so that
// whatever order the host sees the exits in, each spare's death is under
// way (SIGKILL pending, a zombie, or reaped) when its Conn learns that its
// plugin died. No such spare may be promoted: every Get succeeds (none
// with ErrPoisonRequest), each death costs one generation, the breaker
// never opens, and every Conn serves again with a spare ready.
func TestStandbyMassKill(t *testing.T) {
	fleet := massKill(t, 20, 4, true, true)
	for i, m := range fleet {
		if got := m.rc.Current().Number(); got != 5 {
			t.Errorf("Conn %d: generation %d after 4 mass kills, want 5: a spare already dead was promoted", i, got)
		}
	}
}

// TestStandbyMassKillPluginsFirst is TestStandbyMassKill with the plugins
// signalled before the spares: a Conn may promote its spare, found alive,
// before the kill reaches it, and send it the Get. Such a spare's death is
// charged neither to the call (every Get succeeds) nor to the breaker as
// a failed launch: after 4 more mass kills of the idle fleet (4 launches
// of the default 5 that served no call) no breaker is open.
func TestStandbyMassKillPluginsFirst(t *testing.T) {
	massKill(t, 20, 5, false, true)
}

type fleetMember struct {
	rc     *redial.Conn
	rec    *respawntest.Events
	client testpb.TestClient
}

// massKill runs conns Conns with Pacing{Spares: 1} and SIGKILLs all their
// processes at once, rounds times, the spares first or last; with gets,
// the first time with a Get in each plugin's handler, which must succeed.
// Afterwards each Conn must serve, none having opened its breaker.
func massKill(t *testing.T, conns, rounds int, sparesFirst, gets bool) []fleetMember {
	journal := filepath.Join(t.TempDir(), "journal")
	h := newPluginHook(t, "-journal", journal)
	ctx := respawntest.Context(t, 2*time.Minute)
	fleet := make([]fleetMember, conns)
	for i := range fleet {
		rec := &respawntest.Events{}
		rc := newConn(t, h.Respawner(), redial.WithPacing(redial.Pacing{Spares: 1}), redial.WithPolicy(interceptor.New()), redial.WithEventHandler(rec.Add))
		if err := rc.Connect(ctx); err != nil {
			t.Fatalf("Connect: %v", err)
		}
		fleet[i] = fleetMember{rc: rc, rec: rec, client: testpb.NewTestClient(rc)}
	}
	for round := range rounds {
		gens := make([]*redial.Generation, conns)
		var spares, plugins []*redial.Process
		for i, m := range fleet {
			waitSpare(t, m.rc, m.rec)
			ps := redial.SpareProcesses(m.rc)
			if len(ps) != 1 {
				t.Fatalf("round %d: Conn %d has %d spares, want 1", round, i, len(ps))
			}
			spares = append(spares, ps...)
			gens[i] = m.rc.Current()
			plugins = append(plugins, gens[i].Process())
		}
		var wg sync.WaitGroup
		errs := make([]error, conns)
		if gets && round == 0 {
			for i, m := range fleet {
				wg.Go(func() {
					_, errs[i] = m.client.Get(ctx, &testpb.GetRequest{Id: fmt.Sprint("get-", i), DelayMs: 300})
				})
			}
			if err := plugintest.WaitJournal(ctx, journal, func(j map[string]int) bool { return len(j) == conns }); err != nil {
				t.Fatalf("waiting for the Gets to be in their handlers: %v", err)
			}
		}
		victims := slices.Concat(plugins, spares)
		if sparesFirst {
			victims = slices.Concat(spares, plugins)
		}
		for _, p := range victims {
			if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
				t.Fatalf("round %d: SIGKILL %d: %v", round, p.PID, err)
			}
		}
		for _, p := range victims {
			waitDone(t, p.Done(), "a killed process's exit")
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d: Conn %d: the Get in flight at the kill failed: %v", round, i, err)
			}
		}
		for i, m := range fleet { // a plugin current that was not killed
			for g := m.rc.Current(); g == gens[i] || g.Gone(); {
				var err error
				if g, err = redial.HandleOf(m.rc).Next(respawntest.Context(t, respawntest.Timeout), g); err != nil {
					t.Fatalf("round %d: Conn %d: no plugin that was not killed: %v (%d breaker opens)", round, i, err, m.rc.Stats().BreakerOpens)
				}
			}
		}
	}
	for i, m := range fleet {
		if _, err := m.client.Get(ctx, &testpb.GetRequest{}); err != nil {
			t.Errorf("Conn %d: Get after %d mass kills: %v", i, rounds, err)
		}
		if s := m.rc.Stats(); s.BreakerOpens != 0 {
			t.Errorf("Conn %d: the breaker opened %d times", i, s.BreakerOpens)
		}
	}
	return fleet
}

// waitSpare waits until rc has a spare ready, woken by each spare that
// becomes ready.
func waitSpare(t *testing.T, rc *redial.Conn, rec *respawntest.Events) {
	t.Helper()
	isReady := respawntest.SpareReady
	for from := 0; ; {
		if _, ready := redial.SpareCounts(rc); ready == 1 {
			return
		}
		_, i := rec.Log.Wait(t, from, "a spare ready", isReady)
		from = i + 1
	}
}

// TestStandbySpareKilledNotCharged: a Get in the plugin's handler when it
// is SIGKILLed is retried on the promoted spare, which is SIGKILLed from
// outside with the retry in its handler, before it served a call, as a
// mass kill that reaches the spare after its promotion does. That is not
// the call's second death (no ErrPoisonRequest: the Get is retried on a
// third plugin and succeeds), nor a launch that failed (with a breaker of
// 2 launches, the third plugin is launched).
func TestStandbySpareKilledNotCharged(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "journal")
	h := &spareHook{pluginHook: newPluginHook(t, "-journal", journal)}
	rec := &respawntest.Events{}
	rc, pids := standbyConn(t, h, rec, 1, redial.WithPacing(redial.Pacing{CrashLoopLaunches: 2, CrashLoopWindow: time.Minute, CrashLoopCoolDown: time.Hour}))
	ctx := respawntest.Context(t, 20*time.Second)
	ran := func(n int) func(map[string]int) bool { return func(j map[string]int) bool { return j["get"] >= n } }
	errc := make(chan error, 1)
	go func() {
		_, err := testpb.NewTestClient(rc).Get(ctx, &testpb.GetRequest{Id: "get", DelayMs: 300})
		errc <- err
	}()
	if err := plugintest.WaitJournal(ctx, journal, ran(1)); err != nil {
		t.Fatal(err)
	}
	respawntest.Kill(t, rc.Current())
	if err := plugintest.WaitJournal(ctx, journal, ran(2)); err != nil { // the retry, in the spare's handler
		t.Fatal(err)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Get: %v, want it retried on a third plugin", err)
	}
	if got := rc.Current().Number(); got != 3 {
		t.Errorf("generation %d serves, want 3", got)
	}
}
