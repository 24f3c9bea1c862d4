package interceptor_test

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// TestLedgeredStreamEndedUnderSendReadOnce: a ledgered client stream that
// sent more than its replay buffer keeps (committed, yet re-opened with
// its ledger id were its plugin to die), whose caller waits for the answer
// in RecvMsg on another goroutine while it sends, and whose live plugin
// answers before the caller closes its side: one reader reads the
// attempt, RecvMsg gets the plugin's answer, SendMsg io.EOF, and the
// stream's Context ends once the answer is returned.
func TestLedgeredStreamEndedUnderSendReadOnce(t *testing.T) {
	const answerAfter = 20
	h := newHost(t, []string{"-collect-answer-after", fmt.Sprint(answerAfter), "-header-pid"}, nil,
		interceptor.WithLedger(), interceptor.WithLimits(interceptor.Limits{ReplayBuffer: 64, EvidenceWait: time.Hour}))
	for round := range 100 {
		ctx := respawntest.Context(t, 10*time.Second)
		s, err := h.client.Collect(ctx, interceptor.Idempotent(false))
		if err != nil {
			t.Fatal(err)
		}
		// Its encoding and the log's own cost pass 64 bytes: the log is dropped.
		if err := s.Send(&testpb.CollectRequest{Id: "l"}); err != nil {
			t.Fatal(err)
		}
		recvd := make(chan error, 1)
		go func() {
			var resp testpb.CollectResponse
			err := s.RecvMsg(&resp)
			if err == nil && resp.GetCount() != answerAfter {
				err = fmt.Errorf("answered %d messages, want %d", resp.GetCount(), answerAfter)
			}
			recvd <- err
		}()
		if err := sendUntilEnded(func() error { return s.Send(&testpb.CollectRequest{Id: "l"}) }); err != io.EOF {
			t.Fatalf("round %d: Send: %v, want io.EOF once the plugin answered", round, err)
		}
		if err := <-recvd; err != nil {
			t.Fatalf("round %d: RecvMsg: %v, want the plugin's answer", round, err)
		}
		if s.Context().Err() == nil {
			t.Fatalf("round %d: the stream's Context lives on after its answer was returned", round)
		}
	}
	if st := h.rc.Stats(); st.Respawns != 0 || st.Retries != 0 {
		t.Errorf("stats %+v, want no respawn, no retry", st)
	}
}

// TestDeadlinePassesAsStreamReopens: a plugin SIGKILLed under a stream
// (while the caller sends, or waits in RecvMsg), while the caller's
// deadline passes as the stream is opened on its successor (an
// interceptor between respawn's and grpc-go's waits for it there, and
// grpc-go then fails the opening): the caller gets DeadlineExceeded, from
// SendMsg or from the RecvMsg that follows its io.EOF, and from every
// later RecvMsg, as when its ctx ends as the plugin dies
// (TestCtxEndsAsPluginDies); never a SendMsg that says its message went,
// nor the dead attempt's Unavailable.
func TestDeadlinePassesAsStreamReopens(t *testing.T) {
	type call struct {
		send func(seq int64) error // nil: a server stream, sent as it opens
		recv func() error
	}
	streams := []struct {
		name, method string
		open         func(ctx context.Context, c testpb.TestClient) (call, error)
	}{
		{"server stream", "/respawn.test.v1.Test/Watch", func(ctx context.Context, c testpb.TestClient) (call, error) {
			s, err := c.Watch(ctx, &testpb.WatchRequest{Id: "d", DelayMs: 10000, Count: 1})
			return call{recv: func() error { _, err := s.Recv(); return err }}, err
		}},
		{"client stream", "/respawn.test.v1.Test/Collect", func(ctx context.Context, c testpb.TestClient) (call, error) {
			s, err := c.Collect(ctx)
			return call{
				send: func(seq int64) error { return s.Send(&testpb.CollectRequest{Id: "d", Seq: seq}) },
				recv: func() error { _, err := s.CloseAndRecv(); return err },
			}, err
		}},
		{"bidi stream", "/respawn.test.v1.Test/Echo", func(ctx context.Context, c testpb.TestClient) (call, error) {
			s, err := c.Echo(ctx)
			return call{
				send: func(seq int64) error { return s.Send(&testpb.EchoRequest{Id: "d", Seq: seq}) },
				recv: func() error { _, err := s.Recv(); return err },
			}, err
		}},
	}
	for _, st := range streams {
		t.Run(st.name, func(t *testing.T) {
			var reopening atomic.Pointer[context.Context] // the caller's ctx, once the plugin is to die
			h := newHostDialing(t, grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				if c := reopening.Load(); c != nil && method == st.method {
					<-(*c).Done()
				}
				return streamer(ctx, desc, cc, method, opts...)
			}))
			ctx, cancel := context.WithTimeout(respawntest.Context(t, 20*time.Second), 4*time.Second)
			defer cancel()
			c, err := st.open(ctx, h.client)
			if err != nil {
				t.Fatal(err)
			}
			sent := int64(0)
			if c.send != nil {
				if err := c.send(1); err != nil {
					t.Fatal(err)
				}
				sent = 1
			}
			h.waitJournal(t, "d", 1)
			reopening.Store(&ctx)
			respawntest.Kill(t, h.rc.Current())
			for c.send != nil && err == nil && sent < 100000 {
				sent++
				err = c.send(sent)
			}
			if c.send == nil || err == io.EOF {
				err = c.recv()
			}
			if status.Code(err) != codes.DeadlineExceeded {
				t.Errorf("got %v after %d messages sent; want DeadlineExceeded", err, sent)
			}
			for range 2 {
				if err := c.recv(); status.Code(err) != codes.DeadlineExceeded {
					t.Errorf("RecvMsg then: %v; want DeadlineExceeded again", err)
				}
			}
		})
	}
}

// TestStreamEndedPastTheBoundReadOnce: a live plugin that ends a
// bidirectional stream with more answers than the replay buffer keeps,
// found ended by SendMsg: the caller, reading after SendMsg returned
// io.EOF or meanwhile, gets every answer once, in order (those SendMsg
// kept, then those it left to RecvMsg), then the plugin's status.
func TestStreamEndedPastTheBoundReadOnce(t *testing.T) {
	const n = 500
	// Its 500 requests fit, not their answers (their bytes, and 24 bytes each).
	h := newHost(t, []string{"-echo-end-after", fmt.Sprint(n)}, nil, interceptor.WithLimits(interceptor.Limits{ReplayBuffer: 12000}))
	for round, meanwhile := range []bool{false, true, false, true} {
		ctx := respawntest.Context(t, 10*time.Second)
		s, err := h.client.Echo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		recvd := make(chan error, 1)
		recv := func() { recvd <- recvEchoes(s, n) }
		if meanwhile {
			go recv()
		}
		seq := int64(1)
		for ; seq <= n; seq++ {
			if err := s.Send(&testpb.EchoRequest{Id: "p", Seq: seq}); err != nil {
				t.Fatalf("round %d: Send %d: %v", round, seq, err)
			}
		}
		h.waitJournal(t, "p/ended", round+1) // its answers are all sent
		if err := sendUntilEnded(func() error { seq++; return s.Send(&testpb.EchoRequest{Id: "p", Seq: seq}) }); err != io.EOF {
			t.Fatalf("round %d: Send: %v, want io.EOF once the plugin ended the stream", round, err)
		}
		if !meanwhile {
			recv()
		}
		if err := <-recvd; err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	if st := h.rc.Stats(); st.Respawns != 0 || st.Retries != 0 {
		t.Errorf("stats %+v, want no respawn, no retry", st)
	}
}
