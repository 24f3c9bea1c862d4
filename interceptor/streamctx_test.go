package interceptor_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// TestStreamContextPeerIsThePlugins: a stream's Context carries the peer
// of the plugin it runs on, as grpc-go's does, even when the caller's ctx
// has a peer of its own (a host that is a gRPC server passes its handler's
// ctx, whose peer is its client).
func TestStreamContextPeerIsThePlugins(t *testing.T) {
	client := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1}
	for _, tc := range []struct {
		name string
		open func(ctx context.Context, c testpb.TestClient) (grpc.ClientStream, error)
	}{
		{"server", func(ctx context.Context, c testpb.TestClient) (grpc.ClientStream, error) {
			return c.Watch(ctx, &testpb.WatchRequest{Id: "server", Count: 1})
		}},
		{"bidi", func(ctx context.Context, c testpb.TestClient) (grpc.ClientStream, error) {
			return c.Echo(ctx)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, nil, nil)
			ctx := peer.NewContext(respawntest.Context(t, 20*time.Second), &peer.Peer{Addr: client})
			s, err := tc.open(ctx, h.client)
			if err != nil {
				t.Fatal(err)
			}
			p, ok := peer.FromContext(s.Context())
			if !ok || p.Addr == client {
				t.Errorf("the stream's Context has peer %v, want the plugin's, not the caller's %v", p, client)
			}
			_ = s.CloseSend()
		})
	}
}
