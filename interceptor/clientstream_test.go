package interceptor_test

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// TestClientStreamReplayedBeforeCommit: a client stream of an idempotent
// method whose plugin dies before answering is re-opened on the successor
// with every message sent so far, and answered from there.
func TestClientStreamReplayedBeforeCommit(t *testing.T) {
	h := newHost(t, nil, nil)
	old := h.rc.Current().Process().PID
	ctx := respawntest.Context(t, 20*time.Second)
	stream, err := h.client.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := range int64(3) {
		if err := stream.Send(&testpb.CollectRequest{Id: "c", Seq: seq}); err != nil {
			t.Fatalf("Send %d: %v", seq, err)
		}
	}
	h.waitJournal(t, "c", 1)
	respawntest.Kill(t, h.rc.Current())
	if err := stream.Send(&testpb.CollectRequest{Id: "c", Seq: 3}); err != nil {
		t.Fatalf("Send after the kill: %v", err)
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		t.Fatalf("CloseAndRecv: %v", err)
	}
	if resp.GetCount() != 4 || resp.GetPid() == int64(old) {
		t.Errorf("answered %d messages by pid %d; want all 4, by the new plugin (not %d)", resp.GetCount(), resp.GetPid(), old)
	}
	if n := h.executions(t, "c"); n != 2 {
		t.Errorf("the stream ran %d times, want 2: once per plugin", n)
	}
}

// TestClientStreamOutcomeUnknown: a client stream that is not idempotent,
// or that has committed, or that sent more than the replay buffer, fails
// with ErrOutcomeUnknown when its plugin dies; the plugin is respawned.
func TestClientStreamOutcomeUnknown(t *testing.T) {
	for _, tc := range []struct {
		name string
		why  interceptor.OutcomeReason
		opts []interceptor.Option
		call []grpc.CallOption
	}{
		{"not idempotent", interceptor.NotIdempotent, nil, []grpc.CallOption{interceptor.Idempotent(false)}},
		{"past the replay buffer", interceptor.Committed, []interceptor.Option{interceptor.WithLimits(interceptor.Limits{ReplayBuffer: 8})}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, nil, nil, tc.opts...)
			ctx := respawntest.Context(t, 20*time.Second)
			stream, err := h.client.Collect(ctx, tc.call...)
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(&testpb.CollectRequest{Id: "c-" + tc.name, Seq: 1}); err != nil {
				t.Fatal(err)
			}
			h.waitJournal(t, "c-"+tc.name, 1)
			respawntest.Kill(t, h.rc.Current())
			_ = stream.Send(&testpb.CollectRequest{Id: "c", Seq: 2})
			_, err = stream.CloseAndRecv()
			var unknown *interceptor.OutcomeUnknownError
			if !errors.As(err, &unknown) || unknown.Reason != tc.why {
				t.Fatalf("CloseAndRecv: %v, want ErrOutcomeUnknown (%v)", err, tc.why)
			}
			if n := h.executions(t, "c-"+tc.name); n != 1 {
				t.Errorf("the stream ran %d times, want 1", n)
			}
			if _, err := h.client.Get(ctx, &testpb.GetRequest{}); err != nil {
				t.Errorf("the next call: %v", err)
			}
		})
	}
}

// TestBidiReplayedBeforeCommit: a bidirectional stream whose plugin dies
// before its first answer is re-opened and replayed, while one goroutine
// sends and another receives, as grpc-go allows.
func TestBidiReplayedBeforeCommit(t *testing.T) {
	h := newHost(t, nil, nil)
	old := int64(h.rc.Current().Process().PID)
	ctx := respawntest.Context(t, 20*time.Second)
	stream, err := h.client.Echo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The first message is answered after 500ms: the kill comes first.
	if err := stream.Send(&testpb.EchoRequest{Id: "e", Seq: 0, DelayMs: 500}); err != nil {
		t.Fatal(err)
	}
	h.waitJournal(t, "e", 1)
	const n = 5
	respawntest.Kill(t, h.rc.Current())
	sent := make(chan error, 1)
	go func() {
		for seq := int64(1); seq < n; seq++ {
			if err := stream.Send(&testpb.EchoRequest{Id: "e", Seq: seq}); err != nil {
				sent <- fmt.Errorf("Send %d: %w", seq, err)
				return
			}
		}
		sent <- stream.CloseSend()
	}()
	for seq := int64(0); ; seq++ {
		resp, err := stream.Recv()
		if err == io.EOF {
			if seq != n {
				t.Errorf("stream ended after %d answers, want %d", seq, n)
			}
			break
		}
		if err != nil {
			t.Fatalf("Recv %d: %v", seq, err)
		}
		if resp.GetSeq() != seq || resp.GetPid() == old {
			t.Errorf("answer %d: seq %d from pid %d, want seq %d from the new plugin", seq, resp.GetSeq(), resp.GetPid(), seq)
		}
	}
	if err := <-sent; err != nil {
		t.Error(err)
	}
}

// TestBidiCommitted: once a bidirectional stream has had an answer, a death
// ends it with ErrOutcomeUnknown, and the next stream works.
func TestBidiCommitted(t *testing.T) {
	h := newHost(t, nil, nil)
	ctx := respawntest.Context(t, 20*time.Second)
	stream, err := h.client.Echo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&testpb.EchoRequest{Id: "e", Seq: 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	respawntest.Kill(t, h.rc.Current())
	_ = stream.Send(&testpb.EchoRequest{Id: "e", Seq: 1})
	_, err = stream.Recv()
	var unknown *interceptor.OutcomeUnknownError
	if !errors.As(err, &unknown) || unknown.Reason != interceptor.Committed {
		t.Fatalf("Recv after the kill: %v, want ErrOutcomeUnknown (committed)", err)
	}
	next, err := h.client.Echo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Send(&testpb.EchoRequest{Id: "e2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := next.Recv(); err != nil {
		t.Errorf("the next stream: %v", err)
	}
}

// TestServerStreamResume: with WithResume, a server stream whose plugin
// dies after the caller received messages continues on the successor from
// where the caller is: no gap, no repeat.
func TestServerStreamResume(t *testing.T) {
	resume := interceptor.WithResume("/respawn.test.v1.Test/Watch", func(req *testpb.WatchRequest, last *testpb.WatchResponse) (*testpb.WatchRequest, bool) {
		next := proto.Clone(req).(*testpb.WatchRequest)
		next.From = last.GetSeq() + 1
		return next, true
	})
	h := newHost(t, nil, nil, resume)
	old := int64(h.rc.Current().Process().PID)
	const count = 8
	stream, err := h.client.Watch(respawntest.Context(t, 20*time.Second), &testpb.WatchRequest{Id: "w", Count: count, IntervalMs: 100})
	if err != nil {
		t.Fatal(err)
	}
	var pids []int64
	for seq := int64(0); ; seq++ {
		if seq == 3 {
			respawntest.Kill(t, h.rc.Current())
		}
		resp, err := stream.Recv()
		if err == io.EOF {
			if seq != count {
				t.Errorf("the stream ended after %d messages, want %d", seq, count)
			}
			break
		}
		if err != nil {
			t.Fatalf("Recv %d: %v", seq, err)
		}
		if resp.GetSeq() != seq {
			t.Fatalf("message %d has seq %d: a gap or a repeat", seq, resp.GetSeq())
		}
		pids = append(pids, resp.GetPid())
	}
	if pids[0] != old || pids[len(pids)-1] == old {
		t.Errorf("answered by pids %v: want the first plugin, then its successor", pids)
	}
}
