//go:build unix

package redial_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pluginHook is a hook that execs the test plugin with arguments the test
// can switch between calls, and counts its calls.
type pluginHook struct {
	bin   string
	args  atomic.Pointer[[]string]
	calls atomic.Int32
}

func newPluginHook(t *testing.T, args ...string) *pluginHook {
	t.Helper()
	h := &pluginHook{bin: plugintest.BuildOnce(t)}
	h.set(args...)
	return h
}

// set makes the next launches use args.
func (h *pluginHook) set(args ...string) { h.args.Store(&args) }

// Respawner returns the hook as a respawntest.RespawnerFunc delegating to a
// command.Hook.
func (h *pluginHook) Respawner() redial.Respawner {
	return respawntest.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
		h.calls.Add(1)
		cmd := &command.Hook{Path: h.bin, Args: *h.args.Load(), Stderr: os.Stderr}
		return cmd.Respawn(ctx, req)
	})
}

// The checks of respawntest, under the names these tests use.
var (
	newConn      = respawntest.NewConn
	waitDone     = respawntest.WaitDone
	assertReaped = respawntest.AssertReaped
	pidIn        = respawntest.PIDIn
	wantContains = respawntest.WantContains
)

// waitShutdown waits until cc is SHUTDOWN, that is closed.
func waitShutdown(t *testing.T, cc *grpc.ClientConn) {
	t.Helper()
	ctx := respawntest.Context(t, 20*time.Second)
	for s := cc.GetState(); s != connectivity.Shutdown; s = cc.GetState() {
		if !cc.WaitForStateChange(ctx, s) {
			t.Fatalf("connection is %v, want SHUTDOWN", cc.GetState())
		}
	}
}
