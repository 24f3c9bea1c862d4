//go:build unix

package redial_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// TestRecycleByCalls: with a limit of 50 calls per plugin, 4 callers of
// Append see the plugin recycled 3 times with no failed call, every
// acknowledged Append exactly once in the journal, and each rotation says
// it was for 50 calls.
func TestRecycleByCalls(t *testing.T) {
	const limit, recycles = 50, 3
	journal := filepath.Join(t.TempDir(), "journal")
	plugin := newPluginHook(t, "-journal", journal)
	rec := &respawntest.Events{}
	rc, _ := connected(t, plugin, redial.WithPolicy(interceptor.New()), redial.WithPacing(redial.Pacing{GracePeriod: 50 * time.Millisecond}),
		redial.WithPacing(redial.Pacing{Recycle: redial.Recycle{Calls: limit}}), redial.WithEventHandler(rec.Add))
	client := testpb.NewTestClient(rc)
	ctx := respawntest.Context(t, 30*time.Second)

	var (
		stop   atomic.Bool
		wg     sync.WaitGroup
		mu     sync.Mutex
		acked  = map[string]bool{}
		failed []error
	)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				id := fmt.Sprintf("c%d-%d", i, n)
				_, err := client.Append(ctx, &testpb.AppendRequest{Id: id})
				mu.Lock()
				if err != nil {
					failed = append(failed, err)
				} else {
					acked[id] = true
				}
				mu.Unlock()
			}
		}()
	}
	rec.WaitFor(t, "rotated", respawntest.Rotated, recycles)
	stop.Store(true)
	wg.Wait()

	if len(failed) > 0 {
		t.Errorf("%d calls failed, want 0; first: %v", len(failed), failed[0])
	}
	for n := 1; n <= recycles; n++ {
		e := rec.WaitFor(t, "planned respawn start", respawntest.OfGeneration(uint64(n+1), respawntest.PlannedStart), 1)
		var re *redial.RecycleError
		if !errors.As(e.Err, &re) || re.Rule != "calls" || re.Calls != limit || re.Generation != uint64(n) {
			t.Errorf("rotation to generation %d: %v, want a RecycleError for %d calls of generation %d", n+1, e.Err, limit, n)
		}
	}
	j, err := plugintest.ReadJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	for id := range acked {
		if j[id] != 1 {
			t.Errorf("acknowledged Append %s ran %d times, want once", id, j[id])
		}
	}
	if len(j) != len(acked) {
		t.Errorf("journal has %d Appends, %d acknowledged", len(j), len(acked))
	}
}

// TestRecycleByAge: a plugin older than the age limit is rotated, for that
// reason.
func TestRecycleByAge(t *testing.T) {
	plugin := newPluginHook(t)
	rec := &respawntest.Events{}
	connected(t, plugin, redial.WithPacing(redial.Pacing{Recycle: redial.Recycle{Age: 50 * time.Millisecond, Check: 10 * time.Millisecond}}), redial.WithPacing(redial.Pacing{GracePeriod: 10 * time.Millisecond}), redial.WithEventHandler(rec.Add))
	rec.WaitFor(t, "rotated to generation 2", respawntest.OfGeneration(2, respawntest.Rotated), 1)
	e := rec.WaitFor(t, "planned respawn start", respawntest.OfGeneration(2, respawntest.PlannedStart), 1)
	var re *redial.RecycleError
	if !errors.As(e.Err, &re) || re.Rule != "age" || re.Age <= 50*time.Millisecond {
		t.Fatalf("rotation: %v, want a RecycleError for age over 50ms", e.Err)
	}
	if e := rec.Wait(t, redial.EventExit, 1, 1); e.Exit.Reason != "retired" {
		t.Errorf("recycled plugin's exit %v, want retired", e.Exit)
	}
}
