package redial_test

import (
	"fmt"
	"path/filepath"
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

// TestStandbyMassKill SIGKILLs every process of 20 Conns with WithStandby(1)
// at once, each Conn's plugin and its spare, as the OOM kill of a cgroup
// does: first with an idempotent Get in each plugin's handler, then three
// more times with the fleet idle. The spares are signalled first, so that
// whatever order the host sees the exits in, each spare's death is under
// way (SIGKILL pending, a zombie, or reaped) when its Conn learns that its
// plugin died. No such spare may be promoted: every Get succeeds (none
// with ErrPoisonRequest), each death costs one generation, the breaker
// never opens, and every Conn serves again with a spare ready.
func TestStandbyMassKill(t *testing.T) {
	const conns, rounds = 20, 4
	journal := filepath.Join(t.TempDir(), "journal")
	h := newPluginHook(t, "-journal", journal)
	type member struct {
		rc     *redial.Conn
		rec    *respawntest.Events
		client testpb.TestClient
	}
	ctx := respawntest.Context(t, 2*time.Minute)
	fleet := make([]member, conns)
	for i := range fleet {
		rec := &respawntest.Events{}
		rc := newConn(t, h.Respawner(), redial.WithStandby(1), redial.WithPolicy(interceptor.New()), redial.WithEventHandler(rec.Add))
		if err := rc.Connect(ctx); err != nil {
			t.Fatalf("Connect: %v", err)
		}
		fleet[i] = member{rc: rc, rec: rec, client: testpb.NewTestClient(rc)}
	}
	for round := range rounds {
		gens := make([]*redial.Generation, conns)
		var spares, plugins []int
		for i, m := range fleet {
			waitSpare(t, m.rc, m.rec)
			pids := redial.SparePIDs(m.rc)
			if len(pids) != 1 {
				t.Fatalf("round %d: Conn %d has spares %v, want 1", round, i, pids)
			}
			spares = append(spares, pids...)
			gens[i] = m.rc.Current()
			plugins = append(plugins, gens[i].Process().PID())
		}
		var wg sync.WaitGroup
		errs := make([]error, conns)
		if round == 0 {
			for i, m := range fleet {
				wg.Go(func() {
					_, errs[i] = m.client.Get(ctx, &testpb.GetRequest{Id: fmt.Sprint("get-", i), DelayMs: 300})
				})
			}
			if err := plugintest.WaitJournal(ctx, journal, func(j map[string]int) bool { return len(j) == conns }); err != nil {
				t.Fatalf("waiting for the Gets to be in their handlers: %v", err)
			}
		}
		for _, pid := range append(spares, plugins...) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatalf("round %d: SIGKILL %d: %v", round, pid, err)
			}
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d: Conn %d: the Get in flight at the kill failed: %v", round, i, err)
			}
		}
		for i, m := range fleet { // a new plugin current
			if _, err := m.rc.Next(ctx, gens[i]); err != nil {
				t.Fatalf("round %d: Conn %d: Next: %v", round, i, err)
			}
		}
	}
	for i, m := range fleet {
		if _, err := m.client.Get(ctx, &testpb.GetRequest{}); err != nil {
			t.Errorf("Conn %d: Get after %d mass kills: %v", i, rounds, err)
		}
		if got := m.rc.Current().Number(); got != rounds+1 {
			t.Errorf("Conn %d: generation %d after %d mass kills, want %d: a spare already dead was promoted", i, got, rounds, rounds+1)
		}
		if s := m.rc.Stats(); s.BreakerOpens != 0 {
			t.Errorf("Conn %d: the breaker opened %d times", i, s.BreakerOpens)
		}
	}
}

// waitSpare waits until rc has a spare ready, woken by each spare that
// becomes ready.
func waitSpare(t *testing.T, rc *redial.Conn, rec *respawntest.Events) {
	t.Helper()
	isReady := func(e redial.Event) bool { return e.Kind == redial.EventStandbyReady }
	for from := 0; ; {
		if _, ready := redial.SpareCounts(rc); ready == 1 {
			return
		}
		_, i := rec.Log.Wait(t, from, "a spare ready", isReady)
		from = i + 1
	}
}
