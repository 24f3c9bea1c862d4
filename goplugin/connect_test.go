package goplugin_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn"
	"github.com/grpc-respawn/respawn/goplugin"
	"github.com/grpc-respawn/respawn/health"
	"github.com/grpc-respawn/respawn/internal/goplugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// TestConnectWaitsForThePlugin: a host that starts while its plugin cannot
// start yet (it exits 1 until a file, its volume say, is there) waits for
// it with one Connect, which tries again under the Conn's backoff. Before,
// Connect gave up after the first failed launch.
func TestConnectWaitsForThePlugin(t *testing.T) {
	bin := goplugintest.BuildOnce(t)
	ready := filepath.Join(t.TempDir(), "mounted")
	events := &respawntest.Events{}
	ctx := respawntest.Context(t, 30*time.Second)
	done := make(chan error, 1)
	var conn *goplugin.Conn
	go func() {
		var err error
		conn, err = goplugin.Connect(ctx, goplugin.Config{Client: func() *plugin.ClientConfig {
			cfg := goplugintest.Config(bin, "")
			env := cfg.Cmd.Env
			cfg.Cmd = exec.Command("/bin/sh", "-c", `test -e "$1" || exit 1; exec "$2"`, "sh", ready, bin)
			cfg.Cmd.Env = env
			return cfg
		}}, respawn.WithConn(redial.WithEventHandler(events.Add)), respawn.WithHealth(health.Config{Off: true}))
		done <- err
	}()
	events.WaitFor(t, "exit with code 1", func(e redial.Event) bool {
		return e.Kind == redial.EventExit && e.Exit.Code == 1
	}, 2)
	if err := os.WriteFile(ready, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Connect: %v, want it to wait for the plugin", err)
	}
	defer conn.Close()
	raw, err := conn.Dispense(ctx, goplugintest.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.(testpb.TestClient).Get(ctx, &testpb.GetRequest{}); err != nil {
		t.Fatalf("Get: %v", err)
	}
}

// TestConnectKeepsToTheBreaker: a Connect whose plugin never starts
// launches it no more often than the Conn's crash-loop breaker allows, and
// waits at the breaker rather than giving up; it fails when its ctx ends,
// with an error that says why. Before, Connect gave up after one launch,
// and a host that called it again got a fresh breaker each time (26
// launches in 3s where one Conn allows 5).
func TestConnectKeepsToTheBreaker(t *testing.T) {
	bin := goplugintest.BuildOnce(t)
	var launches atomic.Int32
	events := &respawntest.Events{}
	ctx, cancel := context.WithCancel(respawntest.Context(t, 60*time.Second))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		conn, err := goplugin.Connect(ctx, goplugin.Config{Client: func() *plugin.ClientConfig {
			launches.Add(1)
			cfg := goplugintest.Config(bin, "")
			cfg.Cmd.Env = append(cfg.Cmd.Env, goplugintest.ExitAtStartEnv+"=1")
			return cfg
		}}, respawn.WithConn(redial.WithEventHandler(events.Add)), respawn.WithHealth(health.Config{Off: true}))
		if err == nil {
			conn.Close()
		}
		done <- err
	}()
	events.Wait(t, redial.EventBreaker, 0, 1)
	select {
	case err := <-done:
		t.Fatalf("Connect returned %v when the breaker opened, want it to wait out the cool-down", err)
	default:
	}
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || !errors.Is(err, redial.ErrCrashLoop) {
		t.Errorf("Connect: %v, want its ctx's Canceled and the crash loop", err)
	}
	if got, want := launches.Load(), int32(5); got != want { // Pacing's default CrashLoopLaunches
		t.Errorf("launches = %d, want %d", got, want)
	}
}
