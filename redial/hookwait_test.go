//go:build unix

package redial_test

import (
	"context"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial"
)

// TestCloseStopsWhatAnAbandonedHookStarted: a hook still starting a plugin
// when the Conn closes returns soon after its ctx ends; Close waits for it
// and stops what it started, so no plugin outlives a host that exits right
// after Close.
func TestCloseStopsWhatAnAbandonedHookStarted(t *testing.T) {
	stops := newStopCounter()
	started := make(chan struct{})
	hook := respawntest.RespawnerFunc(func(ctx context.Context, _ redial.Request) (redial.Backend, error) {
		close(started)
		<-ctx.Done()
		time.Sleep(100 * time.Millisecond) // the plugin it started, as far as it got
		return redial.Backend{Target: "unix:///nonexistent/redial-test.sock", Stop: stops.Stop}, nil
	})
	rc := newConn(t, hook)
	go func() { _ = rc.Connect(respawntest.Context(t, 20*time.Second)) }()
	<-started
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	if got := stops.n.Load(); got != 1 {
		t.Errorf("Stop called %d times by the time Close returned, want 1", got)
	}
}
