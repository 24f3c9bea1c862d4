//go:build unix

package redial_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
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

// Respawner returns the hook as a redial.RespawnerFunc delegating to a
// command.Hook.
func (h *pluginHook) Respawner() redial.Respawner {
	return redial.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
		h.calls.Add(1)
		cmd := &command.Hook{Path: h.bin, Args: *h.args.Load(), Stderr: os.Stderr}
		return cmd.Respawn(ctx, req)
	})
}

// newConn returns a Conn closed when the test ends.
func newConn(t *testing.T, hook redial.Respawner, opts ...redial.Option) *redial.Conn {
	t.Helper()
	rc, err := redial.New(hook, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = rc.Close() })
	return rc
}

// waitDone waits up to 20s for ch to be closed.
func waitDone(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting: %s", what)
	}
}

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

// assertReaped checks that pid is gone: not running and not a zombie.
func assertReaped(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill(%d, 0) = %v, want ESRCH", pid, err)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("/proc/%d: %v, want it absent (no zombie)", pid, err)
	}
}

var pidRE = regexp.MustCompile(`pid (\d+)`)

// pidIn returns the pid an error message names.
func pidIn(t *testing.T, err error) int {
	t.Helper()
	m := pidRE.FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("error %q names no pid", err)
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

func wantContains(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
}
