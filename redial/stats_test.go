package redial_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testplugin"
	"github.com/grpc-respawn/respawn/redial"
)

// TestStatsCountWhatRotateShowed: once Rotate has returned, Stats counts
// the respawn it did, and names its plugin current: what a caller has seen
// is never ahead of the counts. Rounds, since a count behind would show
// only when the caller reads it first.
func TestStatsCountWhatRotateShowed(t *testing.T) {
	const rounds = 200
	sock := filepath.Join(t.TempDir(), "s.sock")
	srv, err := testplugin.ServeUnix(sock, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	hook := respawntest.RespawnerFunc(func(context.Context, redial.Request) (redial.Backend, error) {
		return redial.Backend{Target: "unix://" + sock}, nil
	})
	rc := respawntest.NewConn(t, hook, redial.WithPacing(redial.Pacing{LaunchRate: 1e6, LaunchBurst: rounds}))
	ctx := respawntest.Context(t, 20*time.Second)
	if err := rc.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= rounds; i++ {
		if err := rc.Rotate(ctx); err != nil {
			t.Fatalf("Rotate %d: %v", i, err)
		}
		if st := rc.Stats(); st.Respawns != i || st.Rotations != i || st.CurrentGen != i+1 {
			t.Fatalf("after Rotate %d: Stats says %d respawns, %d rotations, generation %d; want %d, %d, %d",
				i, st.Respawns, st.Rotations, st.CurrentGen, i, i, i+1)
		}
	}
}
