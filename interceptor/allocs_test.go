package interceptor_test

import (
	"context"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// TestHappyPathAllocs guards the promise that a successful call through the
// interceptor allocates no more than the same call without it.
func TestHappyPathAllocs(t *testing.T) {
	_, target := serveInProcess(t, "")
	plain := dial(t, target)
	hook := redial.RespawnerFunc(func(context.Context, redial.Request) (redial.Backend, error) {
		return redial.Backend{Target: target}, nil
	})
	rc, err := redial.New(hook, redial.WithPolicy(interceptor.New()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ctx := testCtx(t, time.Minute)
	if err := rc.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	withRespawn := testpb.NewTestClient(rc)
	req := &testpb.GetRequest{}
	allocs := func(c testpb.TestClient) float64 {
		return testing.AllocsPerRun(200, func() {
			if _, err := c.Get(ctx, req); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Warm both up, then measure them side by side.
	allocs(plain)
	allocs(withRespawn)
	base, got := allocs(plain), allocs(withRespawn)
	t.Logf("allocs per call: plain %.1f, respawn %.1f", base, got)
	if got > base {
		t.Errorf("a call through respawn allocates %.1f times, plain grpc %.1f: the happy path must add nothing", got, base)
	}

	// A stream needs one object to be retryable before its first message.
	streamAllocs := func(c testpb.TestClient) float64 {
		return testing.AllocsPerRun(100, func() {
			s, err := c.Watch(ctx, &testpb.WatchRequest{Count: 1})
			if err != nil {
				t.Fatal(err)
			}
			for {
				if _, err := s.Recv(); err != nil {
					break
				}
			}
		})
	}
	streamAllocs(plain)
	streamAllocs(withRespawn)
	base, got = streamAllocs(plain), streamAllocs(withRespawn)
	t.Logf("allocs per stream: plain %.1f, respawn %.1f", base, got)
	if got > base+1 {
		t.Errorf("a stream through respawn allocates %.1f times, plain grpc %.1f: want at most one more", got, base)
	}
}
