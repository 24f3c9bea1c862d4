package interceptor

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestGRPCsOwnEndIsNotThePlugins: grpc-go ends an attempt whose trailers
// are in with ErrClientConnClosing, one value for every call, when the
// ClientConn closes before the caller read them: it is not the plugin's
// status, and a later call that fails with it is judged on evidence. A
// status of the plugin's, with its trailers, is.
func TestGRPCsOwnEndIsNotThePlugins(t *testing.T) {
	md := metadata.Pairs("content-type", "application/grpc")
	noteDone(balancer.DoneInfo{Err: grpc.ErrClientConnClosing, Trailer: md})
	if fromPlugin.take(grpc.ErrClientConnClosing) {
		t.Error("grpc-go's ErrClientConnClosing was taken for the plugin's own status")
	}
	own := status.Error(codes.Unavailable, "connect: connection refused")
	noteDone(balancer.DoneInfo{Err: own, Trailer: md})
	if !fromPlugin.take(own) {
		t.Error("the plugin's own status, with its trailers, was not recorded")
	}
}
