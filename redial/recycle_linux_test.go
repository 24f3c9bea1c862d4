package redial_test

import (
	"errors"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// TestRecycleByRSS: a plugin that keeps 2 MiB per call is recycled once its
// resident memory passes 64 MiB, before anything kills it, and no call
// fails.
func TestRecycleByRSS(t *testing.T) {
	const watermark = 64 << 20
	plugin := newPluginHook(t, "-leak-per-call", "2097152")
	rec := &respawntest.Events{}
	rc, g1 := connected(t, plugin, redial.WithPolicy(interceptor.New()),
		redial.WithPacing(redial.Pacing{Recycle: redial.Recycle{RSS: watermark, Check: 5 * time.Millisecond}}), redial.WithEventHandler(rec.Add))
	client := testpb.NewTestClient(rc)
	ctx := respawntest.Context(t, 30*time.Second)
	for n := 0; rc.Current() == g1; n++ {
		if n == 500 { // 1 GiB: the watermark was never seen
			t.Fatalf("not recycled after %d calls", n)
		}
		if _, err := client.Get(ctx, &testpb.GetRequest{}); err != nil {
			t.Fatalf("Get %d: %v", n, err)
		}
	}
	rec.WaitFor(t, "rotated to generation 2", respawntest.OfGeneration(2, respawntest.Rotated), 1)
	e := rec.WaitFor(t, "planned respawn start", respawntest.OfGeneration(2, respawntest.PlannedStart), 1)
	var re *redial.RecycleError
	if !errors.As(e.Err, &re) || re.Rule != "rss" || re.RSS <= watermark {
		t.Fatalf("rotation: %v, want a RecycleError for resident memory over 64 MiB", e.Err)
	}
	t.Logf("%v", re)
	if e := rec.Wait(t, redial.EventExit, 1, 1); e.Exit.Reason != "retired" {
		t.Errorf("recycled plugin's exit %v, want retired", e.Exit)
	}
}
