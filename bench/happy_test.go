//go:build unix

package bench

import (
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
	if _, err := client.Get(ctx, req); err != nil { // connect outside the timer
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := client.Get(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStream measures a server-streaming Watch of 10 messages, opened
// and read to the end, through each client stack over a unix socket.
func BenchmarkStream(b *testing.B) {
	b.Run("transport=unix", func(b *testing.B) {
		target := launchPlugin(b)
		for _, stack := range stacks {
			b.Run("stack="+stack, func(b *testing.B) { benchStream(b, stack, target) })
		}
	})
}

func benchStream(b *testing.B, stack, target string) {
	cc, closeCC := dialStack(b, stack, target)
	defer closeCC()
	client := testpb.NewTestClient(cc)
	ctx, cancel := benchCtx()
	defer cancel()
	req := &testpb.WatchRequest{Count: 10}
	watch := func() {
		s, err := client.Watch(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			_, err := s.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 10 {
			b.Fatalf("got %d messages, want 10", n)
		}
	}
	watch()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		watch()
	}
}
