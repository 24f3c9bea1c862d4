package interceptor_test

import (
	"context"
	"io"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// TestCtxEndsAsPluginDies: an idempotent call of each kind, whose plugin
// is SIGKILLed under it, and whose caller's ctx ends (cancelled, or past
// its deadline) as the attempt fails, before respawn has judged it. The
// caller gets its ctx's code, never the Unavailable of the transport that
// a retry layer outside would take for a fault of the plugin's.
func TestCtxEndsAsPluginDies(t *testing.T) {
	ends := []struct {
		name string
		code codes.Code
	}{
		{"cancel", codes.Canceled},
		{"deadline", codes.DeadlineExceeded},
	}
	calls := []struct {
		name string
		call func(ctx context.Context, c testpb.TestClient, id string) error
	}{
		{"unary", func(ctx context.Context, c testpb.TestClient, id string) error {
			_, err := c.Get(ctx, &testpb.GetRequest{Id: id, DelayMs: 10000})
			return err
		}},
		{"server stream", func(ctx context.Context, c testpb.TestClient, id string) error {
			s, err := c.Watch(ctx, &testpb.WatchRequest{Id: id, DelayMs: 10000, Count: 1})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}},
		{"client stream", func(ctx context.Context, c testpb.TestClient, id string) error {
			s, err := c.Collect(ctx)
			if err != nil {
				return err
			}
			if err := s.Send(&testpb.CollectRequest{Id: id, DelayMs: 10000}); err != nil {
				return err
			}
			_, err = s.CloseAndRecv()
			return err
		}},
		{"bidi stream", func(ctx context.Context, c testpb.TestClient, id string) error {
			s, err := c.Echo(ctx)
			if err != nil {
				return err
			}
			if err := s.Send(&testpb.EchoRequest{Id: id, DelayMs: 10000}); err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}},
	}
	for _, end := range ends {
		for _, c := range calls {
			t.Run(end.name+"/"+c.name, func(t *testing.T) {
				h, endCtx := newHostEndingCtx(t)
				ctx, cancel := context.WithCancel(respawntest.Context(t, 20*time.Second))
				defer cancel()
				if end.code == codes.DeadlineExceeded {
					var dcancel context.CancelFunc
					ctx, dcancel = context.WithTimeout(ctx, 3*time.Second)
					defer dcancel()
					cancel = func() { <-ctx.Done() } // the attempt fails, then the deadline passes
				}
				endCtx.Store(&cancel)
				errc := make(chan error, 1)
				go func() { errc <- c.call(ctx, h.client, "c") }()
				h.waitJournal(t, "c", 1)
				respawntest.Kill(t, h.rc.Current())
				err := <-errc
				if got := status.Code(err); got != end.code {
					t.Errorf("got %v (code %v, Retriable %v); want code %v", err, got, interceptor.Retriable(err), end.code)
				}
			})
		}
	}
}

// newHostEndingCtx returns a host whose plugins are dialled with an
// interceptor between respawn's and grpc-go's that, when an attempt fails,
// calls the function the returned pointer holds (ending the caller's ctx)
// before respawn sees the failure.
func newHostEndingCtx(t *testing.T) (*host, *atomic.Pointer[context.CancelFunc]) {
	t.Helper()
	var end atomic.Pointer[context.CancelFunc]
	failed := func() {
		if f := end.Load(); f != nil {
			(*f)()
		}
	}
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err != nil {
			failed()
		}
		return err
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			failed()
			return nil, err
		}
		return &endingStream{ClientStream: s, failed: failed}, nil
	}
	h := newHostDialing(t, grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream))
	return h, &end
}

// newHostDialing returns a host whose plugins are dialled with opts after
// redial's own: interceptors there run between respawn's and grpc-go's.
func newHostDialing(t *testing.T, opts ...grpc.DialOption) *host {
	t.Helper()
	bin := plugintest.BuildOnce(t)
	h := &host{journal: filepath.Join(t.TempDir(), "journal")}
	h.cmd = &command.Hook{Path: bin, Args: []string{"-journal", h.journal}}
	hook := respawntest.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
		b, err := h.cmd.Respawn(ctx, req)
		if err != nil {
			return b, err
		}
		all := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, req.DialOptions...)
		if b.Conn, err = grpc.NewClient(b.Target, append(all, opts...)...); err != nil {
			_ = b.Stop()
			return redial.Backend{}, err
		}
		return b, nil
	})
	rh := respawntest.NewHost(t, hook, interceptor.New())
	h.rc, h.handle, h.events, h.client = rh.Conn, rh.Handle, rh.Events, rh.Client
	return h
}

// endingStream calls failed when a message fails to go or come.
type endingStream struct {
	grpc.ClientStream
	failed func()
}

func (s *endingStream) SendMsg(m any) error {
	err := s.ClientStream.SendMsg(m)
	if err != nil && err != io.EOF {
		s.failed()
	}
	return err
}

func (s *endingStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil && err != io.EOF {
		s.failed()
	}
	return err
}
