//go:build unix

package goplugin_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn/internal/goplugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/goplugin"
)

// TestInitFailureReportsTheExit: a plugin stopped because its Init failed
// is an exit like any other: an EventExit of an abandoned launch, counted
// in Stats().Exits. Before, its exit was not reported: 2 plugin processes,
// 1 exit.
func TestInitFailureReportsTheExit(t *testing.T) {
	bin := goplugintest.BuildOnce(t)
	var inits atomic.Int32
	events := &respawntest.Events{}
	rc, err := redial.New(&goplugin.Hook{
		Client: func() *plugin.ClientConfig { return goplugintest.Config(bin, "") },
		Init: func(ctx context.Context, cp plugin.ClientProtocol) error {
			if inits.Add(1) == 1 {
				return errors.New("init refused")
			}
			return pushConfig(ctx, cp)
		},
	}, redial.WithEventHandler(events.Add))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := rc.Connect(respawntest.Context(t, 30*time.Second)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	e := events.Wait(t, redial.EventExit, 1, 1)
	if e.Exit.Reason != "launch-abandoned" || e.Err == nil {
		t.Errorf("exit of the plugin whose init failed: %+v (err %v), want a launch-abandoned exit with its error", e.Exit, e.Err)
	}
	if err := rc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got, want := rc.Stats().Exits, uint64(inits.Load()); got != want {
		t.Errorf("Stats().Exits = %d, want %d: one per plugin process launched", got, want)
	}
}
