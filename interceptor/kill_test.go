package interceptor_test

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

func TestKillInFlight(t *testing.T) {
	t.Run("idempotent call succeeds on a new plugin", func(t *testing.T) {
		h := newHost(t, nil, nil)
		oldPID := int64(h.rc.Current().Process().PID)
		done := make(chan struct{})
		var resp *testpb.GetResponse
		var err error
		go func() {
			defer close(done)
			resp, err = h.client.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{Id: "get-1", DelayMs: 3000})
		}()
		h.waitJournal(t, "get-1", 1)
		respawntest.Kill(t, h.rc.Current())
		<-done
		if err != nil {
			t.Fatalf("Get after kill: got %v, want success", err)
		}
		if resp.GetPid() == oldPID {
			t.Errorf("answered by pid %d, the killed plugin", oldPID)
		}
		if got := h.rc.Stats().Respawns; got != 1 {
			t.Errorf("respawns = %d, want 1", got)
		}
	})
	t.Run("non-idempotent call fails as outcome unknown", func(t *testing.T) {
		h := newHost(t, nil, nil)
		done := make(chan error)
		go func() {
			_, err := h.client.Append(respawntest.Context(t, 20*time.Second), &testpb.AppendRequest{Id: "append-1", DelayMs: 3000})
			done <- err
		}()
		h.waitJournal(t, "append-1", 1)
		respawntest.Kill(t, h.rc.Current())
		err := <-done
		if !errors.Is(err, interceptor.ErrOutcomeUnknown) {
			t.Fatalf("Append after kill: got %v, want ErrOutcomeUnknown", err)
		}
		if got := status.Code(err); got != codes.Unknown {
			t.Errorf("code = %v, want Unknown: retry layers retry Unavailable", got)
		}
		if n := h.executions(t, "append-1"); n != 1 {
			t.Errorf("append-1 ran %d times, want 1", n)
		}
		if _, err := h.client.Append(respawntest.Context(t, 20*time.Second), &testpb.AppendRequest{Id: "append-2"}); err != nil {
			t.Fatalf("next Append: %v", err)
		}
		if got := h.rc.Stats().Respawns; got != 1 {
			t.Errorf("respawns = %d, want 1", got)
		}
	})
}

func TestKillBetweenCalls(t *testing.T) {
	for _, stub := range []string{"bound to the Conn", "bound to the first connection"} {
		t.Run(stub, func(t *testing.T) {
			h := newHost(t, nil, nil)
			client := h.client
			if stub == "bound to the first connection" {
				// As a go-plugin host does: the stub keeps the connection of
				// the plugin it was dispensed from.
				client = testpb.NewTestClient(h.rc.Current().ClientConn())
			}
			for i, id := range []string{"a1", "a2", "a3"} {
				if _, err := client.Append(respawntest.Context(t, 20*time.Second), &testpb.AppendRequest{Id: id}); err != nil {
					t.Fatalf("Append %s: %v", id, err)
				}
				if n := h.executions(t, id); n != 1 {
					t.Errorf("%s ran %d times, want 1", id, n)
				}
				dead := h.rc.Current()
				respawntest.Kill(t, dead)
				waitLeftReady(t, dead)
				if got := h.rc.Stats().Respawns; got != uint64(i) {
					t.Errorf("respawns before the next call = %d, want %d", got, i)
				}
			}
			if _, err := client.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{}); err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got := h.rc.Stats().Respawns; got != 3 {
				t.Errorf("respawns = %d, want 3", got)
			}
		})
	}
}

func TestHandlerUnavailableIsNotADeath(t *testing.T) {
	h := newHost(t, nil, nil)
	gen := h.rc.Current().Number()
	_, err := h.client.Fail(respawntest.Context(t, 10*time.Second), &testpb.FailRequest{Code: uint32(codes.Unavailable), Message: "bucket is read-only"})
	if got := status.Convert(err); got.Code() != codes.Unavailable || got.Message() != "bucket is read-only" {
		t.Fatalf("Fail: got %v, want the handler's own Unavailable", err)
	}
	_ = h.rc.Close() // settle: a respawn on its way would show below
	if got := h.rc.Stats(); got.CurrentGen != gen || got.Respawns != 0 || got.Retries != 0 {
		t.Errorf("stats %+v after a handler error, want generation %d, no respawn, no retry", got, gen)
	}
}
