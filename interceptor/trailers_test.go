package interceptor_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// TestTrailerStatusIsThePluginsOwn: a proxying plugin's Unavailable, with
// grpc-go's transport text, came in its trailers on a live transport: it
// is the plugin's own at once (a unary call's first attempt, as the load
// balancer of the Policy's default service config tells it; a stream's
// attempts and a unary call's retries, from their trailer), without waiting for evidence of a death.
// With an evidence wait far longer than the caller's deadline, a call that
// waited would end with its ctx.
func TestTrailerStatusIsThePluginsOwn(t *testing.T) {
	u := refusingUpstream(t)
	h := newHost(t, []string{"-upstream", u.target}, nil, interceptor.WithLimits(interceptor.Limits{EvidenceWait: time.Hour}))
	for _, tt := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"unary read", func(ctx context.Context) error {
			_, err := h.client.Get(ctx, &testpb.GetRequest{Id: "get"})
			return err
		}},
		{"unary write", func(ctx context.Context) error {
			_, err := h.client.Append(ctx, &testpb.AppendRequest{Id: "append"})
			return err
		}},
		{"server stream", func(ctx context.Context) error {
			s, err := h.client.Watch(ctx, &testpb.WatchRequest{Id: "watch", Count: 1})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}},
		{"unary retry", func(ctx context.Context) error {
			// Its plugin is dead: the call is not sent there, but retried
			// on the successor.
			g := h.rc.Current()
			respawntest.Kill(t, g)
			<-g.Process().Done()
			waitLeftReady(t, g)
			_, err := h.client.Append(ctx, &testpb.AppendRequest{Id: "append"})
			if n := h.rc.Stats().Respawns; n != 1 {
				t.Errorf("%d respawns, want 1: the call went to the successor", n)
			}
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := tt.call(ctx)
			if ctx.Err() != nil {
				t.Errorf("the call returned once its ctx had ended (%v): it waited for evidence", err)
			}
			if s := status.Convert(err); s.Code() != codes.Unavailable || !strings.Contains(s.Message(), u.text) {
				t.Errorf("got %v, want the handler's own Unavailable with %q", err, u.text)
			}
		})
	}
}

// TestStreamEndedBeforeHeaderIsThePluginsOwn: a live plugin that ends a
// client stream with Unavailable and grpc-go's transport text, before any
// header, while the caller sends: SendMsg returns io.EOF at once, and
// CloseAndRecv the plugin's status. With an evidence wait far longer than
// the caller's deadline, a SendMsg that waited would end with its ctx.
func TestStreamEndedBeforeHeaderIsThePluginsOwn(t *testing.T) {
	h := newHost(t, []string{"-collect-refuse-after", "1"}, nil, interceptor.WithLimits(interceptor.Limits{EvidenceWait: time.Hour}))
	ctx := respawntest.Context(t, 10*time.Second)
	s, err := h.client.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 100000 {
		if err = s.Send(&testpb.CollectRequest{Id: "c"}); err != nil {
			break
		}
	}
	if err != io.EOF {
		t.Fatalf("Send: %v, want io.EOF once the plugin ended the stream", err)
	}
	_, err = s.CloseAndRecv()
	if ctx.Err() != nil {
		t.Errorf("the stream returned once its ctx had ended (%v): it waited for evidence", err)
	}
	if s := status.Convert(err); s.Code() != codes.Unavailable || !strings.Contains(s.Message(), "connection refused") {
		t.Errorf("got %v, want the plugin's own Unavailable", err)
	}
	if st := h.rc.Stats(); st.Respawns != 0 || st.Retries != 0 {
		t.Errorf("stats %+v, want no respawn, no retry", st)
	}
}
