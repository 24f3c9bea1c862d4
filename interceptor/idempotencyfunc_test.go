package interceptor_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// idemCall is one call of a WithIdempotencyFunc func.
type idemCall struct {
	method string
	req    any
}

// TestIdempotencyFuncWhen: the func runs when its doc says: never for a
// unary call or a server stream that succeeds, with the request once a
// call failed where it may have run, and with nil at every open of a
// client or bidi stream.
func TestIdempotencyFuncWhen(t *testing.T) {
	var (
		mu    sync.Mutex
		calls []idemCall
	)
	f := interceptor.WithIdempotencyFunc(func(method string, req any) (bool, bool) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, idemCall{method, req})
		return false, false
	})
	took := func() []idemCall {
		mu.Lock()
		defer mu.Unlock()
		c := calls
		calls = nil
		return c
	}
	h := newHost(t, nil, nil, f)
	ctx := respawntest.Context(t, 20*time.Second)

	if _, err := h.client.Get(ctx, &testpb.GetRequest{Key: "k"}); err != nil {
		t.Fatal(err)
	}
	watch, err := h.client.Watch(ctx, &testpb.WatchRequest{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = watch.Recv()
	}
	if err != io.EOF {
		t.Fatal(err)
	}
	if c := took(); len(c) != 0 {
		t.Errorf("a Get and a Watch that succeeded called the func %d times (%v), want 0", len(c), c)
	}

	for _, open := range []struct {
		method string
		open   func() (interface{ CloseSend() error }, error)
	}{
		{"/respawn.test.v1.Test/Collect", func() (interface{ CloseSend() error }, error) { return h.client.Collect(ctx) }},
		{"/respawn.test.v1.Test/Echo", func() (interface{ CloseSend() error }, error) { return h.client.Echo(ctx) }},
	} {
		s, err := open.open()
		if err != nil {
			t.Fatal(err)
		}
		if c := took(); !slices.Equal(c, []idemCall{{open.method, nil}}) {
			t.Errorf("opening %s called the func with %v, want once with a nil request", open.method, c)
		}
		_ = s.CloseSend()
	}

	req := &testpb.AppendRequest{Id: "killed", DelayMs: 5000}
	err = h.killMidCall(t, "killed", func(ctx context.Context) error {
		_, err := h.client.Append(ctx, req)
		return err
	})
	if !errors.Is(err, interceptor.ErrOutcomeUnknown) {
		t.Errorf("Append killed mid-call: %v, want ErrOutcomeUnknown", err)
	}
	if c := took(); len(c) != 1 || c[0].method != "/respawn.test.v1.Test/Append" || c[0].req != req {
		t.Errorf("an Append killed mid-call called the func with %v, want once with its request", c)
	}
}
