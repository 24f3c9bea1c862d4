//go:build unix

package bench

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/testpb"
)

// BenchmarkLiveAnswer measures a live plugin's own end of a call, which
// respawn must return as it is, through each client stack side by side
// against one plugin subprocess on a unix socket (plain is the floor):
// call=unary, a Get the plugin answers with Unavailable and grpc-go's
// "connection refused" text, as a plugin that proxies a server that is
// down does; call=send-refused, a Collect that the plugin ends so after
// its first message, before any header, while the caller sends until
// SendMsg returns io.EOF and then reads the status; call=send-answered,
// the same with a Collect that the plugin answers (header, message, then
// trailers) after its first message. go-grpc-middleware's retry refuses
// client streams: those run on plain and respawn only.
func BenchmarkLiveAnswer(b *testing.B) {
	refusing := launchLivePlugin(b, "-collect-refuse-after", "1")
	answering := launchLivePlugin(b, "-collect-answer-after", "1")
	for _, call := range []string{"unary", "send-refused", "send-answered"} {
		target := refusing
		if call == "send-answered" {
			target = answering
		}
		for _, stack := range stacks {
			if call != "unary" && stack != "plain" && stack != "respawn" {
				continue
			}
			b.Run("call="+call+"/stack="+stack, func(b *testing.B) { benchLiveAnswer(b, call, stack, target) })
		}
	}
}

func benchLiveAnswer(b *testing.B, call, stack, target string) {
	cc, closeCC := dialStack(b, stack, target)
	defer closeCC()
	client := testpb.NewTestClient(cc)
	ctx, cancel := benchCtx()
	defer cancel()
	run := liveUnary(ctx, client)
	switch call {
	case "send-refused":
		run = liveSend(ctx, client, codes.Unavailable)
	case "send-answered":
		run = liveSend(ctx, client, codes.OK)
	}
	benchOp(b, run)
}

// liveUnary makes a Get that the proxying plugin fails with Unavailable.
func liveUnary(ctx context.Context, client testpb.TestClient) func() error {
	req := &testpb.GetRequest{Key: "k"}
	return func() error {
		_, err := client.Get(ctx, req)
		if status.Code(err) != codes.Unavailable {
			return errors.New("want the plugin's Unavailable, got " + status.Convert(err).String())
		}
		return nil
	}
}

// liveSend sends on a Collect until the plugin has ended it, then reads
// its answer, which must have code want.
func liveSend(ctx context.Context, client testpb.TestClient, want codes.Code) func() error {
	req := &testpb.CollectRequest{}
	return func() error {
		s, err := client.Collect(ctx)
		if err != nil {
			return err
		}
		for {
			if err := s.Send(req); err == io.EOF {
				break
			} else if err != nil {
				return err
			}
		}
		resp, err := s.CloseAndRecv()
		switch {
		case status.Code(err) != want:
			return errors.New("want " + want.String() + ", got " + status.Convert(err).String())
		case err == nil && resp.GetCount() != 1:
			return errors.New("the plugin did not answer after its first message")
		}
		return nil
	}
}

// launchLivePlugin starts a plugin that forwards Get to an address where
// nothing listens, with args for its Collect.
func launchLivePlugin(tb testing.TB, args ...string) string {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	refused := lis.Addr().String()
	_ = lis.Close() // nothing listens there now: connection refused
	return launchPlugin(tb, append([]string{"-upstream", refused}, args...)...)
}
