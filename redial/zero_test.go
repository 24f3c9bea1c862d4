//go:build unix

package redial_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// TestZeroConnIsClosed: every method of a zero Conn returns at once, with
// an error that matches ErrClosed where it has one, and launches nothing.
// Before, Close, Connect, Invoke, Rotate and Next panicked (Respawn in a
// goroutine of redial's, which crashed the host).
func TestZeroConnIsClosed(t *testing.T) {
	ctx := respawntest.Context(t, 10*time.Second)
	tests := []struct {
		name    string
		call    func(c *redial.Conn) error
		wantNil bool // no error: nothing to fail
	}{
		{name: "Close", call: func(c *redial.Conn) error { return c.Close() }, wantNil: true},
		{name: "Connect", call: func(c *redial.Conn) error { return c.Connect(ctx) }},
		{name: "Invoke", call: func(c *redial.Conn) error {
			_, err := testpb.NewTestClient(c).Get(ctx, &testpb.GetRequest{})
			return err
		}},
		{name: "NewStream", call: func(c *redial.Conn) error {
			_, err := c.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/x/Y")
			return err
		}},
		{name: "Rotate", call: func(c *redial.Conn) error { return c.Rotate(ctx) }},
		{name: "Next", call: func(c *redial.Conn) error { _, err := redial.HandleOf(c).Next(ctx, nil); return err }},
		{name: "Replace", call: func(c *redial.Conn) error { _, err := redial.HandleOf(c).Replace(ctx, nil, nil); return err }},
		{name: "Respawn, then Close", call: func(c *redial.Conn) error { redial.StartRespawn(c, nil); return c.Close() }, wantNil: true},
		{name: "Reset, Stats, KillHung, Current", call: func(c *redial.Conn) error {
			c.Reset()
			c.Current().KillHung(nil)
			if s := c.Stats(); s.Respawns != 0 {
				return errors.New("respawned")
			}
			return nil
		}, wantNil: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c redial.Conn
			err := tt.call(&c)
			if tt.wantNil {
				if err != nil {
					t.Errorf("got %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, redial.ErrClosed) || status.Code(err) != codes.Canceled || !strings.Contains(err.Error(), "redial.New") {
				t.Errorf("got %v (code %v), want an error matching ErrClosed that names redial.New", err, status.Code(err))
			}
		})
	}
}

// panicBackOff is a BackOff whose NextBackOff panics.
type panicBackOff struct{}

func (panicBackOff) NextBackOff() time.Duration { panic("NextBackOff") }
func (panicBackOff) Reset()                     {}

// TestBadBackOff: a WithBackOff func that returns nil, or a BackOff that
// panics, gets the default backoff (no panic under the Conn's lock, which
// left Close hanging); a BackOff that returns backoff.Stop gives up: no
// more launches, an error matching ErrPermanent until Reset. Before, nil
// and the panic panicked under the Conn's lock, and Stop was read as "no
// wait": the hook ran again.
func TestBadBackOff(t *testing.T) {
	tests := []struct {
		name      string
		backoff   func() backoff.BackOff
		wantCalls int32 // hook calls after three Connects
		wantPerm  bool  // the third Connect fails with ErrPermanent
	}{
		{"func returns nil", func() backoff.BackOff { return nil }, 3, false},
		{"NextBackOff panics", func() backoff.BackOff { return panicBackOff{} }, 3, false},
		{"func panics", func() backoff.BackOff { panic("newBackOff") }, 3, false},
		{"Stop after one retry", func() backoff.BackOff { return backoff.WithMaxRetries(&backoff.ZeroBackOff{}, 1) }, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			hook := respawntest.RespawnerFunc(func(context.Context, redial.Request) (redial.Backend, error) {
				calls.Add(1)
				return redial.Backend{}, errors.New("cannot start")
			})
			rc := newConn(t, hook, redial.WithPacing(redial.Pacing{BackOff: tt.backoff}), redial.WithPacing(redial.Pacing{LaunchRate: 1000, LaunchBurst: 1000}))
			var err error
			for range 3 {
				err = rc.ConnectOnce(respawntest.Context(t, 20*time.Second))
			}
			if got := calls.Load(); got != tt.wantCalls {
				t.Errorf("hook called %d times, want %d", got, tt.wantCalls)
			}
			if perm := errors.Is(err, redial.ErrPermanent); perm != tt.wantPerm || err == nil {
				t.Errorf("third Connect: %v; want an error, matching ErrPermanent: %v", err, tt.wantPerm)
			}
			if tt.wantPerm {
				if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "backoff gave up") || !strings.Contains(err.Error(), "cannot start") {
					t.Errorf("third Connect: %v (code %v), want FailedPrecondition saying the backoff gave up, and the last cause", err, status.Code(err))
				}
				rc.Reset()
				_ = rc.ConnectOnce(respawntest.Context(t, 20*time.Second))
				if got := calls.Load(); got != tt.wantCalls+1 {
					t.Errorf("after Reset: hook called %d times, want %d", got, tt.wantCalls+1)
				}
			}
			closed := make(chan error, 1)
			go func() { closed <- rc.Close() }()
			select {
			case <-closed:
			case <-time.After(20 * time.Second):
				t.Fatal("Close hangs")
			}
		})
	}
}

// TestPanickingClock: a WithClock func that panics, which runs under the
// Conn's lock, reads as time.Now: launches go on and Close returns.
// Before, the panic left the lock held and Close hanging.
func TestPanickingClock(t *testing.T) {
	var calls atomic.Int32
	hook := respawntest.RespawnerFunc(func(context.Context, redial.Request) (redial.Backend, error) {
		calls.Add(1)
		return redial.Backend{}, errors.New("cannot start")
	})
	rc := newConn(t, hook, redial.WithClock(func() time.Time { panic("clock") }))
	if err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second)); err == nil || !strings.Contains(err.Error(), "cannot start") {
		t.Errorf("Connect: %v, want the hook's error", err)
	}
	if calls.Load() != 1 {
		t.Errorf("hook called %d times, want 1", calls.Load())
	}
	closed := make(chan error, 1)
	go func() { closed <- rc.Close() }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close hangs")
	}
}
