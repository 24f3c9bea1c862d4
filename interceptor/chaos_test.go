//go:build unix

package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// TestChaos: 16 callers while the plugin is SIGKILLed every 400ms. Every
// idempotent call succeeds, no non-idempotent call runs twice, and there is
// exactly one respawn per death.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos runs for seconds")
	}
	h := newHost(t, nil, nil)
	const callers = 16
	ctx, stop := context.WithTimeout(context.Background(), 3*time.Second)
	defer stop()

	var idemOK, idemFailed, appendOK, appendUnknown, appendOther atomic.Int64
	var appended sync.Map // id → true when the caller saw success
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				func() {
					callCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					switch n % 3 {
					case 0, 1:
						_, err := h.client.Put(callCtx, &testpb.PutRequest{Key: fmt.Sprint(i), Value: fmt.Sprint(n), DelayMs: 5})
						if err == nil {
							_, err = h.client.Get(callCtx, &testpb.GetRequest{Key: fmt.Sprint(i), DelayMs: 5})
						}
						if err != nil {
							idemFailed.Add(1)
							t.Errorf("idempotent call failed: %v", err)
							return
						}
						idemOK.Add(1)
					case 2:
						id := fmt.Sprintf("c%d-%d", i, n)
						_, err := h.client.Append(callCtx, &testpb.AppendRequest{Id: id, DelayMs: 5})
						switch {
						case err == nil:
							appendOK.Add(1)
							appended.Store(id, true)
						case errors.Is(err, interceptor.ErrOutcomeUnknown):
							appendUnknown.Add(1)
						default:
							appendOther.Add(1)
							t.Errorf("Append %s: %v, want success or ErrOutcomeUnknown", id, err)
						}
					}
				}()
			}
		}()
	}

	kills := 0
	tick := time.NewTicker(400 * time.Millisecond)
	defer tick.Stop()
	var lastKilled uint64
	for ctx.Err() == nil {
		select {
		case <-tick.C:
		case <-ctx.Done():
			continue
		}
		g := h.rc.Current()
		if g.Number() == lastKilled { // not replaced yet: killing it again is not a new death
			continue
		}
		if err := syscall.Kill(g.Process().PID, syscall.SIGKILL); err == nil {
			kills++
			lastKilled = g.Number()
		}
	}
	wg.Wait()
	// The last death is replaced by the next call.
	if _, err := h.client.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{}); err != nil {
		t.Fatalf("Get after the chaos: %v", err)
	}

	j, err := h.journalCounts(t)
	if err != nil {
		t.Fatal(err)
	}
	for id, n := range j {
		if n > 1 && id[0] == 'c' {
			t.Errorf("Append %s ran %d times", id, n)
		}
	}
	appended.Range(func(id, _ any) bool {
		if j[id.(string)] != 1 {
			t.Errorf("Append %s succeeded but ran %d times", id, j[id.(string)])
		}
		return true
	})
	s := h.rc.Stats()
	t.Logf("kills %d, respawns %d, retries %d; idempotent ok %d failed %d; append ok %d outcome-unknown %d other %d",
		kills, s.Respawns, s.Retries, idemOK.Load(), idemFailed.Load(), appendOK.Load(), appendUnknown.Load(), appendOther.Load())
	if kills < 3 {
		t.Fatalf("only %d kills: the machine is too slow for this test to mean anything", kills)
	}
	if s.Respawns != uint64(kills) {
		t.Errorf("respawns = %d, kills = %d: want one respawn per death", s.Respawns, kills)
	}
}
