//go:build unix

package bench

import (
	"fmt"
	"io"
	"testing"

	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/internal/testpb"
)

// BenchmarkUnary measures one successful unary call (Get) through each client
// stack, against one server shared by all stacks so they are compared side
// by side: a plugin subprocess on a real unix socket, and an in-process
// server over bufconn, where the interceptors' own cost is less hidden by
// the transport.
func BenchmarkUnary(b *testing.B) {
	b.Run("transport=unix", func(b *testing.B) {
		target := launchPlugin(b)
		for _, stack := range stacks {
			b.Run("stack="+stack, func(b *testing.B) { benchUnary(b, stack, target) })
		}
	})
	b.Run("transport=bufconn", func(b *testing.B) {
		target, dialer := serveBufconn(b)
		for _, stack := range stacks {
			b.Run("stack="+stack, func(b *testing.B) { benchUnary(b, stack, target, dialer) })
		}
	})
}

func benchUnary(b *testing.B, stack, target string, transport ...grpc.DialOption) {
	cc, closeCC := dialStack(b, stack, target, transport...)
	defer closeCC()
	client := testpb.NewTestClient(cc)
	ctx, cancel := benchCtx()
	defer cancel()
	req := &testpb.GetRequest{Key: "k"}
	benchOp(b, func() error {
		_, err := client.Get(ctx, req)
		return err
	})
}

// BenchmarkStream measures a stream of 10 messages, opened and run to its
// end, through each client stack over a unix socket: kind=server, a Watch
// that receives 10; kind=client, a Collect that sends 10 (from one reused
// message) and receives the count; kind=bidi, an Echo that sends 10 and
// receives 10 answers. go-grpc-middleware's retry refuses client and
// bidirectional streams: those run on plain and respawn only.
func BenchmarkStream(b *testing.B) {
	b.Run("transport=unix", func(b *testing.B) {
		target := launchPlugin(b)
		for _, kind := range []string{"server", "client", "bidi"} {
			for _, stack := range stacks {
				if kind != "server" && stack != "plain" && stack != "respawn" {
					continue
				}
				b.Run("kind="+kind+"/stack="+stack, func(b *testing.B) { benchStream(b, kind, stack, target) })
			}
		}
	})
}

func benchStream(b *testing.B, kind, stack, target string) {
	cc, closeCC := dialStack(b, stack, target)
	defer closeCC()
	client := testpb.NewTestClient(cc)
	ctx, cancel := benchCtx()
	defer cancel()
	const n = 10
	var run func() error
	switch kind {
	case "server":
		req := &testpb.WatchRequest{Count: n}
		run = func() error {
			s, err := client.Watch(ctx, req)
			if err != nil {
				return err
			}
			got := 0
			for {
				_, err := s.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					return err
				}
				got++
			}
			if got != n {
				return fmt.Errorf("got %d messages, want %d", got, n)
			}
			return nil
		}
	case "client":
		req := &testpb.CollectRequest{}
		run = func() error {
			s, err := client.Collect(ctx)
			if err != nil {
				return err
			}
			for seq := range int64(n) {
				req.Seq = seq
				if err := s.Send(req); err != nil {
					return err
				}
			}
			resp, err := s.CloseAndRecv()
			if err == nil && resp.GetCount() != n {
				err = fmt.Errorf("the plugin got %d messages, want %d", resp.GetCount(), n)
			}
			return err
		}
	case "bidi":
		req := &testpb.EchoRequest{}
		run = func() error {
			s, err := client.Echo(ctx)
			if err != nil {
				return err
			}
			for seq := range int64(n) {
				req.Seq = seq
				if err := s.Send(req); err != nil {
					return err
				}
				if _, err := s.Recv(); err != nil {
					return err
				}
			}
			if err := s.CloseSend(); err != nil {
				return err
			}
			if _, err := s.Recv(); err != io.EOF {
				return fmt.Errorf("after the last answer: %v, want io.EOF", err)
			}
			return nil
		}
	}
	benchOp(b, run)
}

// benchOp runs op once outside the timer (the connection is made then),
// and then b.N times, failing b at the first error.
func benchOp(b *testing.B, op func() error) {
	if err := op(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
}
