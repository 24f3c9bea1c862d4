//go:build unix

package redial_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial"
)

// TestHookGoexit: a hook that calls runtime.Goexit (t.FailNow in a test's
// hook does) fails the respawn at once with ErrHookPanic, not after the
// respawn timeout, and leaves no goroutine behind (TestMain checks).
// Before, it was reported as a timeout and a goroutine waited forever.
func TestHookGoexit(t *testing.T) {
	hook := respawntest.RespawnerFunc(func(ctx context.Context, _ redial.Request) (redial.Backend, error) {
		runtime.Goexit()
		return redial.Backend{}, nil
	})
	rc := newConn(t, hook, redial.WithPacing(redial.Pacing{RespawnTimeout: time.Hour}))
	err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second))
	if !errors.Is(err, redial.ErrHookPanic) || errors.Is(err, redial.ErrRespawnTimeout) {
		t.Fatalf("Connect: %v, want ErrHookPanic (and no timeout)", err)
	}
	wantContains(t, err, "runtime.Goexit")
}
