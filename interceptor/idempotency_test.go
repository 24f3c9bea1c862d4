package interceptor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

const (
	getMethod    = "/respawn.test.v1.Test/Get"
	appendMethod = "/respawn.test.v1.Test/Append"
)

// TestKilledMidCallBySource: which source of idempotency wins decides what a
// call killed in its handler gets: a retry on the new plugin, or
// ErrOutcomeUnknown. Passthrough methods get their error as it is.
func TestKilledMidCallBySource(t *testing.T) {
	const delay = 1500 // ms: long enough to be killed in the handler
	get := func(opts ...grpc.CallOption) func(context.Context, testpb.TestClient) error {
		return func(ctx context.Context, c testpb.TestClient) error {
			_, err := c.Get(ctx, &testpb.GetRequest{Id: "call", DelayMs: delay}, opts...)
			return err
		}
	}
	appendCall := func(opts ...grpc.CallOption) func(context.Context, testpb.TestClient) error {
		return func(ctx context.Context, c testpb.TestClient) error {
			_, err := c.Append(ctx, &testpb.AppendRequest{Id: "call", DelayMs: delay}, opts...)
			return err
		}
	}
	unknownFunc := interceptor.WithIdempotencyFunc(func(string, any) (bool, bool) { return false, false })
	type want int
	const (
		retried want = iota
		outcomeUnknown
		asIs // passthrough: grpc-go's error as it is, and no respawn
	)
	tests := []struct {
		name string
		opts []interceptor.Option
		call func(context.Context, testpb.TestClient) error
		want want
	}{
		{"per-call Idempotent(true) on Append", nil, appendCall(interceptor.Idempotent(true)), retried},
		{"per-call Idempotent(false) on Get", nil, get(interceptor.Idempotent(false)), outcomeUnknown},
		{"per-call Idempotent(false) over WithIdempotentMethods", []interceptor.Option{interceptor.WithIdempotentMethods(appendMethod)}, appendCall(interceptor.Idempotent(false)), outcomeUnknown},
		{"WithIdempotentMethods(Append)", []interceptor.Option{interceptor.WithIdempotentMethods(appendMethod)}, appendCall(), retried},
		{"WithIdempotencyFunc unknown defers to NO_SIDE_EFFECTS on Get", []interceptor.Option{unknownFunc}, get(), retried},
		{"WithIdempotencyFunc unknown defers to no option on Append", []interceptor.Option{unknownFunc}, appendCall(), outcomeUnknown},
		{"WithIdempotencyFunc known over the proto option", []interceptor.Option{interceptor.WithIdempotencyFunc(func(m string, _ any) (bool, bool) { return false, m == getMethod })}, get(), outcomeUnknown},
		{"WithPassthrough(Get)", []interceptor.Option{interceptor.WithPassthrough(func(m string) bool { return m == getMethod })}, get(), asIs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHost(t, nil, nil, tt.opts...)
			err := h.killMidCall(t, "call", func(ctx context.Context) error { return tt.call(ctx, h.client) })
			executions, respawns := 1, uint64(1)
			switch tt.want {
			case retried:
				if err != nil {
					t.Fatalf("got %v, want success on a new plugin", err)
				}
				executions = 2
			case outcomeUnknown:
				if !errors.Is(err, interceptor.ErrOutcomeUnknown) || status.Code(err) != codes.Unknown {
					t.Fatalf("got %v, want ErrOutcomeUnknown with code Unknown", err)
				}
			case asIs:
				if err == nil || errors.Is(err, interceptor.ErrOutcomeUnknown) || status.Code(err) != codes.Unavailable {
					t.Fatalf("got %v, want grpc-go's own Unavailable", err)
				}
				respawns = 0
			}
			if got := h.executions(t, "call"); got != executions {
				t.Errorf("executions = %d, want %d", got, executions)
			}
			if tt.want == asIs {
				if got := h.events.Count(redial.EventRetry, 0); got != 0 {
					t.Errorf("%d retries of a passthrough method, want 0", got)
				}
			} else {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				if _, err := h.client.Get(ctx, &testpb.GetRequest{}); err != nil {
					t.Fatalf("next call: %v", err)
				}
			}
			if got := h.rc.Stats().Respawns; got != respawns {
				t.Errorf("respawns = %d, want %d", got, respawns)
			}
		})
	}
}

// TestMaxAttemptsOne: a call whose plugin dies under it is not retried with
// WithLimits(Limits{MaxAttempts: 1}), but the plugin is respawned for the next call.
func TestMaxAttemptsOne(t *testing.T) {
	h := newHost(t, nil, nil, interceptor.WithLimits(interceptor.Limits{MaxAttempts: 1}))
	old := h.rc.Current()
	err := h.killMidCall(t, "a", func(ctx context.Context) error {
		_, err := h.client.Get(ctx, &testpb.GetRequest{Id: "a", DelayMs: 5000})
		return err
	})
	if got := interceptor.Classify(err); got != interceptor.MaybeProcessed {
		t.Fatalf("Get killed mid-call: got %v (%v), want the maybe-processed error as it is", err, got)
	}
	ctx := respawntest.Context(t, 20*time.Second)
	// Join the respawn the death started; a second one would show in the
	// counts below.
	if _, err := h.handle.Replace(ctx, old, err); err != nil {
		t.Fatalf("waiting for the respawn: %v", err)
	}
	if _, err := h.client.Get(ctx, &testpb.GetRequest{Id: "b"}); err != nil {
		t.Fatalf("next call: %v", err)
	}
	if got := h.executions(t, "a"); got != 1 {
		t.Errorf("a ran %d times, want 1", got)
	}
	_ = h.rc.Close()                           // settle: no respawn may still be on its way
	h.events.Wait(t, redial.EventClosed, 0, 1) // the last event: the others have been seen
	if got := h.events.Count(redial.EventRetry, 0); got != 0 {
		t.Errorf("%d retries, want 0", got)
	}
	if got := h.rc.Stats().Respawns; got != 1 {
		t.Errorf("respawns = %d, want 1", got)
	}
	h.events.Wait(t, redial.EventRespawnStart, 0, 2) // delivered asynchronously
	if got := h.events.Count(redial.EventRespawnStart, 0); got != 2 {
		t.Errorf("launches = %d, want 2: the first and the one the death started", got)
	}
}
