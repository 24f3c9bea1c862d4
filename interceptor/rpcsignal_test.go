package interceptor_test

import (
	"context"

	"google.golang.org/grpc/stats"
)

// rpcSignal is a stats.Handler that signals c when grpc-go reports an
// event of type E of a call to method ("" for any call): a *stats.Begin
// when an attempt begins, before it picks a transport; a
// *stats.InTrailer once the host's transport has read the trailers.
type rpcSignal[E stats.RPCStats] struct {
	method string
	c      chan struct{}
}

type rpcSignalMethod struct{}

func (h *rpcSignal[E]) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, rpcSignalMethod{}, info.FullMethodName)
}

func (h *rpcSignal[E]) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if _, ok := s.(E); ok && (h.method == "" || ctx.Value(rpcSignalMethod{}) == h.method) {
		select {
		case h.c <- struct{}{}:
		default:
		}
	}
}

func (*rpcSignal[E]) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (*rpcSignal[E]) HandleConn(context.Context, stats.ConnStats)                       {}
