package redial

import (
	"context"
	"io"

	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/internal/ownrpc"
)

// A Conn without a [Policy] still routes: a call made on a connection it
// retired — by a stub bound to the first plugin's connection, as go-plugin
// hosts dispense them — goes to the current plugin, waiting for it if the
// current one is known dead. Nothing is retried; a call cut by a death
// fails. With a Policy, the policy routes (and retries) instead.

// routeOptions are the dial options of a Conn without a Policy.
func (c *Conn) routeOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(c.routeUnary),
		grpc.WithChainStreamInterceptor(c.routeStream),
	}
}

// routed returns the generation a call on cc goes to, and its connection:
// none for a call on a connection that is not ours, else the current one,
// once it is not known dead (waiting for its successor if it is).
func (c *Conn) routed(ctx context.Context, cc *grpc.ClientConn, method string) (*Generation, *grpc.ClientConn, error) {
	if ownrpc.Instance(method) {
		return nil, cc, nil // one plugin instance's: where it was sent, served by no one
	}
	g := c.route(cc)
	if g == nil {
		return nil, cc, nil
	}
	if c.closed.Load() {
		return nil, nil, ErrClosed
	}
	for g.Gone() { // a successor may be dead already, as in a mass kill
		ng, err := c.replace(ctx, g, exitCause(g.backend.Process))
		if err != nil {
			return nil, nil, err
		}
		g = ng
	}
	return g, g.cc, nil
}

func (c *Conn) routeUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	g, cc, err := c.routed(ctx, cc, method)
	if err != nil {
		return err
	}
	err = invoker(ctx, method, req, reply, cc, opts...)
	if err == nil && g != nil && !g.Served() {
		g.MarkServed()
	}
	return err
}

func (c *Conn) routeStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	g, cc, err := c.routed(ctx, cc, method)
	if err != nil {
		return nil, err
	}
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || g == nil || g.Served() {
		return cs, err
	}
	return &servingStream{ClientStream: cs, g: g}, nil
}

// servingStream marks its plugin served once a message or the stream's
// clean end arrives, as a unary call's answer does.
type servingStream struct {
	grpc.ClientStream
	g *Generation
}

func (s *servingStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if (err == nil || err == io.EOF) && !s.g.Served() {
		s.g.MarkServed()
	}
	return err
}

// goWatcher is [Handle.Go]. f runs on c.wg, which Close waits for: f must
// not call Close.
func (c *Conn) goWatcher(f func(ctx context.Context)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f(c.ctx)
	}()
}
