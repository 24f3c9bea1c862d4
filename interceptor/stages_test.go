//go:build unix

package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// TestKillAtEveryStage: 16 callers in a loop while plugins are SIGKILLed at
// every stage of their connection: while redial dials them (connect,
// preface, settings), mid-call and between calls. No idempotent call is
// lost, and no write runs twice.
//
// The kills take turns, so that no call is in two plugins that die; where
// the kernel cannot tell an OOM kill from these SIGKILLs, one call under
// which two plugins die is taken for a poison request.
func TestKillAtEveryStage(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos runs for seconds")
	}
	bin := plugintest.BuildOnce(t)
	journal := filepath.Join(t.TempDir(), "journal")
	cmd := &command.Hook{Path: bin, Args: []string{"-journal", journal}}
	// An armed launch is reached through a proxy that kills the plugin as
	// soon as redial's connection to it reaches a stage of its setup.
	var armed atomic.Int64 // a stage
	var launches atomic.Int64
	var killedAt [afterSettings + 1]atomic.Int64
	hook := respawntest.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
		b, err := cmd.Respawn(ctx, req)
		launches.Add(1)
		at := stage(armed.Swap(int64(noStage)))
		if err != nil || at == noStage {
			return b, err
		}
		killedAt[at].Add(1)
		proxy := newStageProxy(t, t.TempDir(), strings.TrimPrefix(b.Target, "unix://"), b.Process.PID, at)
		stop := b.Stop
		b.Target, b.Stop = proxy.addr(), func() error { proxy.close(); return stop() }
		return b, nil
	})
	events := &respawntest.Events{}
	rc, err := redial.New(hook, redial.WithPolicy(interceptor.New()), redial.WithEventHandler(events.Add))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	client := testpb.NewTestClient(rc)

	ctx, stop := context.WithTimeout(context.Background(), 3*time.Second)
	defer stop()
	var idemOK, appendOK, appendUnknown atomic.Int64
	var acked sync.Map
	var wg sync.WaitGroup
	var between sync.RWMutex // held for writing: no call in flight
	for i := range 16 {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				between.RLock()
				callCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				if n%3 == 2 {
					id := fmt.Sprintf("c%d-%d", i, n)
					_, err := client.Append(callCtx, &testpb.AppendRequest{Id: id, DelayMs: 2})
					switch {
					case err == nil:
						appendOK.Add(1)
						acked.Store(id, true)
					case errors.Is(err, interceptor.ErrOutcomeUnknown):
						appendUnknown.Add(1)
					default:
						t.Errorf("Append %s: %v, want success or ErrOutcomeUnknown", id, err)
					}
				} else if _, err := client.Get(callCtx, &testpb.GetRequest{Id: fmt.Sprintf("g%d-%d", i, n), DelayMs: 2}); err != nil {
					t.Errorf("idempotent call failed: %v", err)
				} else {
					idemOK.Add(1)
				}
				cancel()
				between.RUnlock()
			}
		})
	}
	// Turns, 150ms apart: a kill between calls, whose successor is killed
	// at a stage of its setup; then a kill mid-call.
	kills, turn := 0, 0
	tick := time.NewTicker(150 * time.Millisecond)
	for ctx.Err() == nil {
		select {
		case <-tick.C:
		case <-ctx.Done():
			continue
		}
		g := rc.Current()
		if g.Gone() {
			continue
		}
		if turn%2 == 0 {
			between.Lock()
			armed.Store(int64([...]stage{atConnect, afterPreface, afterSettings}[turn/2%3]))
		}
		if syscall.Kill(g.Process().PID, syscall.SIGKILL) == nil {
			kills++
		}
		if turn%2 == 0 {
			<-g.Process().Done()
			between.Unlock()
		}
		turn++
	}
	tick.Stop()
	wg.Wait()

	j, err := plugintest.ReadJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	for id, n := range j {
		if id[0] == 'c' && n > 1 {
			t.Errorf("Append %s ran %d times", id, n)
		}
	}
	acked.Range(func(id, _ any) bool {
		if j[id.(string)] != 1 {
			t.Errorf("Append %s succeeded but ran %d times", id, j[id.(string)])
		}
		return true
	})
	if t.Failed() {
		for _, e := range events.All() {
			t.Logf("%s gen %d %v %v", e.Kind, e.Generation, e.Exit, e.Err)
		}
	}
	s := rc.Stats()
	t.Logf("kills %d mid-use; launches %d, killed at connect %d, preface %d, settings %d; respawns %d, failed respawns %d, retries %d; idempotent ok %d; append ok %d, outcome unknown %d",
		kills, launches.Load(), killedAt[atConnect].Load(), killedAt[afterPreface].Load(), killedAt[afterSettings].Load(),
		s.Respawns, s.FailedRespawns, s.Retries, idemOK.Load(), appendOK.Load(), appendUnknown.Load())
	if kills < 6 {
		t.Fatalf("only %d kills: the machine is too slow for this test to mean anything", kills)
	}
}
