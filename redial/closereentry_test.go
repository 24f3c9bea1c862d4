//go:build unix

package redial_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// stopWrapper returns a hook that starts the test plugin with a
// command.Hook and gives each Backend the Stop wrap(generation, the hook's
// Stop).
func stopWrapper(t *testing.T, wrap func(gen uint64, stop func() error) error) redial.Respawner {
	bin := plugintest.BuildOnce(t)
	return respawntest.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
		b, err := (&command.Hook{Path: bin, Stderr: os.Stderr}).Respawn(ctx, req)
		if err == nil {
			stop := b.Stop
			b.Stop = func() error { return wrap(req.Generation, stop) }
		}
		return b, err
	})
}

// waitErr waits up to respawntest.Timeout for what ch gives; what names it
// in the failure.
func waitErr(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(respawntest.Timeout):
		t.Fatalf("%s did not return within %v", what, respawntest.Timeout)
		return nil
	}
}

// TestCloseFromStopGoroutine: a Stop that calls Close on a goroutine of its
// own and waits for it gets nil at once, and the Close that ran the Stop
// returns.
func TestCloseFromStopGoroutine(t *testing.T) {
	var rc *redial.Conn
	inStop := make(chan error, 1)
	rc = newConn(t, stopWrapper(t, func(_ uint64, stop func() error) error {
		errc := make(chan error, 1)
		go func() { errc <- rc.Close() }()
		inStop <- <-errc
		return stop()
	}))
	if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	pid := rc.Current().Process().PID
	closed := make(chan error, 1)
	go func() { closed <- rc.Close() }()
	if err := waitErr(t, closed, "Close, with a Stop that waits for a Close on another goroutine,"); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-inStop; err != nil {
		t.Errorf("the Close the Stop waited for: %v, want nil", err)
	}
	assertReaped(t, pid)
}

// TestCloseFromRetiringStop: the Stop of a plugin being retired after it
// was killed, run while its successor serves, calls Close, the first one:
// that Close returns, having stopped the successor, and the Stop then ends
// its own plugin.
func TestCloseFromRetiringStop(t *testing.T) {
	var rc *redial.Conn
	inStop := make(chan error, 1)
	stopped := make(chan struct{})
	rc = newConn(t, stopWrapper(t, func(gen uint64, stop func() error) error {
		if gen != 1 {
			return stop()
		}
		inStop <- rc.Close()
		defer close(stopped)
		return stop()
	}))
	ctx := respawntest.Context(t, 20*time.Second)
	if err := rc.Connect(ctx); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	first := rc.Current()
	respawntest.Kill(t, first) // replaced by plugin 2, then stopped: its Stop closes the Conn
	if err := waitErr(t, inStop, "Close, called by the Stop of a retired plugin,"); err != nil {
		t.Errorf("Close: %v", err)
	}
	waitDone(t, stopped, "the retired plugin's Stop")
	g := rc.Current()
	if g == nil || g.Number() != 2 {
		t.Fatalf("current plugin %v when Close returned, want plugin 2", g)
	}
	assertReaped(t, first.Process().PID)
	assertReaped(t, g.Process().PID)
}

// TestCloseSecondReturnsAtOnce: a Close made while the first one waits for
// the plugin's Stop returns nil at once; the first returns once the Stop
// has.
func TestCloseSecondReturnsAtOnce(t *testing.T) {
	stopping, release := make(chan struct{}), make(chan struct{})
	rc := newConn(t, stopWrapper(t, func(_ uint64, stop func() error) error {
		close(stopping)
		<-release
		return stop()
	}))
	if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	first := make(chan error, 1)
	go func() { first <- rc.Close() }()
	waitDone(t, stopping, "the plugin's Stop")
	second := make(chan error, 1)
	go func() { second <- rc.Close() }()
	select {
	case err := <-second:
		if err != nil {
			t.Errorf("second Close: %v, want nil", err)
		}
	case <-time.After(respawntest.Timeout):
		t.Errorf("the second Close did not return within %v while the first waited for a Stop", respawntest.Timeout)
	}
	select {
	case err := <-first:
		t.Fatalf("the first Close returned (%v) before the plugin's Stop", err)
	default:
	}
	close(release)
	if err := waitErr(t, first, "the first Close"); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestCloseFromEventHandler: an event handler that closes the Conn, the
// first Close, gets it back, and then is given the exit of the plugin that
// Close stopped and the EventClosed, last.
func TestCloseFromEventHandler(t *testing.T) {
	var rc *redial.Conn
	var events respawntest.Events
	inHandler := make(chan error, 1)
	rc = newConn(t, newPluginHook(t).Respawner(), redial.WithEventHandler(func(e redial.Event) {
		events.Add(e)
		if e.Kind == redial.EventRespawnDone && e.Err == nil {
			inHandler <- rc.Close()
		}
	}))
	if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil && !errors.Is(err, redial.ErrClosed) {
		t.Fatalf("Connect: %v", err)
	}
	if err := waitErr(t, inHandler, "Close, called by the event handler,"); err != nil {
		t.Errorf("Close: %v", err)
	}
	exit := events.Wait(t, redial.EventExit, 1, 1)
	if exit.Exit.Reason != redial.ExitClosed {
		t.Errorf("plugin 1 exited %v, want %v", exit.Exit.Reason, redial.ExitClosed)
	}
	last := events.Wait(t, redial.EventClosed, 0, 1)
	if last.Err != nil || last.Generation != 1 {
		t.Errorf("EventClosed with Err %v, Generation %d; want nil, 1", last.Err, last.Generation)
	}
	if all := events.All(); all[len(all)-1].Kind != redial.EventClosed {
		t.Errorf("events after EventClosed: %v", all)
	}
}
