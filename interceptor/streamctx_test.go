package interceptor_test

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
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

// TestBidiStreamConcurrentUseAcrossReplay: an idempotent bidi stream used
// from four goroutines at once — one sending then closing, one receiving,
// one asking for the header, one reading the Context — while its plugin is
// killed before any answer: the stream is replayed on the successor, which
// echoes each message once, in order, and every call returns.
func TestBidiStreamConcurrentUseAcrossReplay(t *testing.T) {
	h := newHost(t, nil, nil)
	old := int64(h.rc.Current().Process().PID)
	ctx := respawntest.Context(t, 30*time.Second)
	s, err := h.client.Echo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The first answer waits: the kill comes first.
	if err := s.Send(&testpb.EchoRequest{Id: "conc", Seq: 0, DelayMs: 2000}); err != nil {
		t.Fatal(err)
	}
	const n = 6
	type got struct {
		seqs []int64
		pids map[int64]bool
		err  error
	}
	recvd := make(chan got, 1)
	go func() {
		g := got{pids: map[int64]bool{}}
		for {
			m, err := s.Recv()
			if err != nil {
				g.err = err
				recvd <- g
				return
			}
			g.seqs, g.pids[m.GetPid()] = append(g.seqs, m.GetSeq()), true
		}
	}()
	header := make(chan error, 1)
	go func() {
		_, err := s.Header()
		header <- err
	}()
	stopCtx := make(chan struct{})
	ctxDone := make(chan struct{})
	go func() {
		defer close(ctxDone)
		for {
			c := s.Context()
			_, _ = peer.FromContext(c)
			select {
			case <-stopCtx:
				return
			case <-c.Done():
				return
			default:
			}
		}
	}()
	h.waitJournal(t, "conc", 1)
	sent := make(chan error, 1)
	go func() {
		for seq := int64(1); seq < n; seq++ {
			if err := s.Send(&testpb.EchoRequest{Id: "conc", Seq: seq}); err != nil {
				sent <- err
				return
			}
		}
		sent <- s.CloseSend()
	}()
	respawntest.Kill(t, h.rc.Current())
	if err := <-sent; err != nil {
		t.Errorf("Send/CloseSend: %v", err)
	}
	select {
	case g := <-recvd:
		if g.err != io.EOF {
			t.Errorf("Recv ended with %v, want io.EOF", g.err)
		}
		if len(g.seqs) != n || g.pids[old] || len(g.pids) != 1 {
			t.Errorf("answers %v from pids %v: want seq 0..%d once each, from the successor (not %d)", g.seqs, g.pids, n-1, old)
		}
		for i, seq := range g.seqs {
			if seq != int64(i) {
				t.Errorf("answer %d has seq %d", i, seq)
			}
		}
	case <-ctx.Done():
		t.Fatal("Recv never ended")
	}
	if err := <-header; err != nil {
		t.Errorf("Header: %v", err)
	}
	close(stopCtx)
	<-ctxDone
}

// TestStreamContextAnswersDuringReplay: a stream's Context, and its values,
// answer while the stream waits for the successor it is re-opened on, as
// grpc-go's never block: a host goroutine that takes st.Context() in its
// loop is not held up by the replay.
func TestStreamContextAnswersDuringReplay(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(ctx context.Context, c testpb.TestClient) (grpc.ClientStream, error)
	}{
		{"bidi", func(ctx context.Context, c testpb.TestClient) (grpc.ClientStream, error) {
			s, err := c.Echo(ctx)
			if err != nil {
				return nil, err
			}
			return s, s.SendMsg(&testpb.EchoRequest{Id: "bidi", DelayMs: 2000})
		}},
		{"server", func(ctx context.Context, c testpb.TestClient) (grpc.ClientStream, error) {
			return c.Watch(ctx, &testpb.WatchRequest{Id: "server", DelayMs: 2000, Count: 1})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, nil, nil)
			s, err := tc.open(respawntest.Context(t, 30*time.Second), h.client)
			if err != nil {
				t.Fatal(err)
			}
			sctx := s.Context()
			recvd := make(chan error, 1)
			go func() { recvd <- s.RecvMsg(new(testpb.EchoResponse)) }()
			h.waitJournal(t, tc.name, 1)
			h.successor("-start-delay", "5s")
			respawntest.Kill(t, h.rc.Current())
			h.events.Wait(t, redial.EventRespawnStart, 0, 2) // the successor is starting
			_, _ = peer.FromContext(s.Context())
			_, _ = peer.FromContext(sctx)
			if n := h.events.Count(redial.EventRespawnDone, 0); n != 1 {
				t.Errorf("the stream's Context answered after the successor was up (%d launches done): it waited for the replay", n)
			}
			if err := <-recvd; err != nil && err != io.EOF {
				t.Errorf("RecvMsg: %v", err)
			}
		})
	}
}
