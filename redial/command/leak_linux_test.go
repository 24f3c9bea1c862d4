package command_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// TestRespawnLeaksNothing: 200 times SIGKILL the plugin, respawn it and
// call it; then Close. Goroutines, open fds, child processes and socket
// dirs must all be back to what they were before the first launch.
func TestRespawnLeaksNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("200 respawns")
	}
	bin := plugintest.BuildOnce(t)
	base := t.TempDir() // the plugins' PLUGIN_UNIX_SOCKET_DIR
	fds, kids := respawntest.OpenFDs(t), respawntest.Children(t)
	goroutines := goleak.IgnoreCurrent()

	hook := &command.Hook{Path: bin, Env: append(os.Environ(), "PLUGIN_UNIX_SOCKET_DIR="+base), Stderr: os.Stderr}
	var h redial.Handle // to replace the plugin as a policy would
	rc, err := redial.New(hook, redial.WithPacing(redial.Pacing{GracePeriod: time.Millisecond}), respawntest.WithHandle(nil, &h))
	if err != nil {
		t.Fatal(err)
	}
	client := testpb.NewTestClient(rc)
	ctx := respawntest.Context(t, 2*time.Minute)
	if err := rc.Connect(ctx); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	cause := errors.New("killed by the test")
	for i := range 200 {
		g := rc.Current()
		respawntest.Kill(t, g)
		g2, err := h.Replace(ctx, g, cause)
		if err != nil {
			t.Fatalf("respawn %d: %v", i+1, err)
		}
		resp, err := client.Get(ctx, &testpb.GetRequest{})
		if err != nil {
			t.Fatalf("call after respawn %d: %v", i+1, err)
		}
		if resp.GetPid() != int64(g2.Process().PID) {
			t.Fatalf("respawn %d: served by pid %d, want %d", i+1, resp.GetPid(), g2.Process().PID)
		}
	}
	if err := rc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	goleak.VerifyNone(t, goroutines) // first: a closed fd is released once its reader returns
	if got := respawntest.Children(t); !slices.Equal(got, kids) {
		t.Errorf("child processes after Close: %v, before: %v", got, kids)
	}
	// More is a leak; fewer, an earlier test's fd closed meanwhile (go-plugin
	// closes a dead plugin's pipes a second after it is reaped).
	if got := respawntest.OpenFDs(t); got > fds {
		t.Errorf("%d open fds after Close, %d before", got, fds)
	}
	if dirs, _ := filepath.Glob(filepath.Join(base, "*")); len(dirs) != 0 {
		t.Errorf("socket dirs left: %v", dirs)
	}
}
