//go:build unix

package interceptor_test

import (
	"io"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// TestEveryKindOfCallIsServed: a plugin that serves only streams — a
// bidirectional one, a client stream, a server stream that ends with no
// message — has served calls, so its ordinary deaths do not open the
// crash-loop breaker, however many.
func TestEveryKindOfCallIsServed(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(t *testing.T, c testpb.TestClient)
	}{
		{"bidi", func(t *testing.T, c testpb.TestClient) {
			s, err := c.Echo(respawntest.Context(t, 20*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Send(&testpb.EchoRequest{}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Recv(); err != nil {
				t.Fatal(err)
			}
			_ = s.CloseSend()
			if _, err := s.Recv(); err != io.EOF {
				t.Fatalf("end of the bidi stream: %v", err)
			}
		}},
		{"client stream", func(t *testing.T, c testpb.TestClient) {
			s, err := c.Collect(respawntest.Context(t, 20*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Send(&testpb.CollectRequest{}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.CloseAndRecv(); err != nil {
				t.Fatal(err)
			}
		}},
		{"server stream with no message", func(t *testing.T, c testpb.TestClient) {
			s, err := c.Watch(respawntest.Context(t, 20*time.Second), &testpb.WatchRequest{Count: 0})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Recv(); err != io.EOF {
				t.Fatalf("empty server stream: %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, nil, []redial.Option{redial.WithPacing(redial.Pacing{CrashLoopLaunches: 3, CrashLoopWindow: time.Minute, CrashLoopCoolDown: time.Minute})})
			ctx := respawntest.Context(t, 10*time.Second)
			for range 5 { // more deaths than the breaker's 3 launches
				tc.call(t, h.client)
				g := h.rc.Current()
				respawntest.Kill(t, g)
				if _, err := h.handle.Next(ctx, g); err != nil {
					t.Fatalf("no plugin after the death of plugin %d: %v", g.Number(), err)
				}
			}
			tc.call(t, h.client)
			_ = h.rc.Close()
			if n := h.rc.Stats().BreakerOpens; n != 0 {
				t.Errorf("the breaker opened %d times for a plugin that served every stream", n)
			}
		})
	}
}
