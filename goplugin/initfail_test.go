//go:build unix

package goplugin_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn/goplugin"
	"github.com/grpc-respawn/respawn/internal/goplugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// TestConnectFailureStopsThePlugin: a Connect that fails while the
// Config.Init it runs is still calling the plugin with
// context.Background() (as Velero's stubs do) leaves no plugin running
// once it has returned. Before, the plugin kept running after Connect
// returned its error.
func TestConnectFailureStopsThePlugin(t *testing.T) {
	bin := goplugintest.BuildOnce(t)
	var pid atomic.Int64
	ctx := respawntest.Context(t, 30*time.Second)
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := goplugin.Connect(short, goplugin.Config{
		Client: func() *plugin.ClientConfig { return goplugintest.Config(bin, "") },
		Init: func(_ context.Context, cp plugin.ClientProtocol) error {
			raw, err := cp.Dispense(goplugintest.Name)
			if err != nil {
				return err
			}
			c := raw.(testpb.TestClient)
			resp, err := c.Get(context.Background(), &testpb.GetRequest{})
			if err != nil {
				return err
			}
			pid.Store(resp.GetPid())
			// Hangs until the plugin is gone, whatever the respawn does.
			_, err = c.Get(context.Background(), &testpb.GetRequest{DelayMs: 60_000})
			return err
		},
	})
	if err == nil {
		conn.Close()
		t.Fatal("Connect succeeded, want it to fail at its ctx")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Connect: %v, want its ctx's DeadlineExceeded", err)
	}
	if pid.Load() == 0 {
		t.Fatal("Init never reached the plugin")
	}
	respawntest.AssertReaped(t, int(pid.Load()))
}
