package interceptor

import (
	"testing"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// closing stands for grpc-go's own end of an attempt at the closing of
// its ClientConn (grpc.ErrClientConnClosing): one Canceled value shared by
// every call.
var closing = status.Error(codes.Canceled, "grpc: the client connection is closing")

// TestGRPCsOwnEndIsNotThePlugins: grpc-go ends an attempt whose trailers
// are in with one error value for every call when the ClientConn closes
// (or the caller's ctx ends) before the caller read them: it is not the
// plugin's status, and a later call that fails with it is judged on
// evidence. A status of the plugin's, with its trailers, is.
func TestGRPCsOwnEndIsNotThePlugins(t *testing.T) {
	md := metadata.Pairs("content-type", "application/grpc")
	noteDone(balancer.DoneInfo{Err: closing, Trailer: md})
	if fromPlugin.take(closing) {
		t.Error("grpc-go's shared end of an attempt was taken for the plugin's own status")
	}
	own := status.Error(codes.Unavailable, "connect: connection refused")
	noteDone(balancer.DoneInfo{Err: own, Trailer: md})
	if !fromPlugin.take(own) {
		t.Error("the plugin's own status, with its trailers, was not recorded")
	}
}
