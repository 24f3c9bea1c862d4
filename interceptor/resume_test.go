package interceptor_test

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial/command"
)

// resumeWatch continues a Watch after the last message received.
var resumeWatch = interceptor.WithResume("/respawn.test.v1.Test/Watch", func(req *testpb.WatchRequest, last *testpb.WatchResponse) (*testpb.WatchRequest, bool) {
	next := proto.Clone(req).(*testpb.WatchRequest)
	next.From = last.GetSeq() + 1
	return next, true
})

// watchReceived opens a Watch of req, with a 20s deadline, and receives
// its first n messages.
func watchReceived(t *testing.T, h *host, req *testpb.WatchRequest, n int) grpc.ServerStreamingClient[testpb.WatchResponse] {
	t.Helper()
	stream, err := h.client.Watch(respawntest.Context(t, 20*time.Second), req)
	if err != nil {
		t.Fatal(err)
	}
	for seq := range n {
		if _, err := stream.Recv(); err != nil {
			t.Fatalf("Recv %d: %v", seq, err)
		}
	}
	return stream
}

// TestServerStreamResumeEachDeath: a long server stream with WithResume
// goes on across more plugin deaths than one call's budget of deaths and
// attempts allows, when each plugin delivered messages before it died: the
// request did not kill them, and each resume is a call of its own.
func TestServerStreamResumeEachDeath(t *testing.T) {
	h := newHost(t, nil, nil, resumeWatch)
	const (
		count = 20
		kills = 3 // more deaths than Limits.MaxAttempts's default 4 attempts allow
		each  = 3 // messages from a plugin before it is killed
	)
	stream, err := h.client.Watch(respawntest.Context(t, 20*time.Second), &testpb.WatchRequest{Id: "w", Count: count, IntervalMs: 50})
	if err != nil {
		t.Fatal(err)
	}
	var pids []int64 // the plugins, in the order they answered
	from := map[int64]int{}
	for seq := int64(0); ; seq++ {
		resp, err := stream.Recv()
		if err == io.EOF {
			if seq != count {
				t.Errorf("the stream ended after %d messages, want %d", seq, count)
			}
			break
		}
		if err != nil {
			t.Fatalf("Recv %d, after %d kills: %v", seq, len(pids)-1, err)
		}
		if resp.GetSeq() != seq {
			t.Fatalf("message %d has seq %d: a gap or a repeat", seq, resp.GetSeq())
		}
		pid := resp.GetPid()
		if from[pid] == 0 {
			pids = append(pids, pid)
		}
		if from[pid]++; from[pid] == each && len(pids) <= kills {
			g := h.rc.Current()
			if int64(g.Process().PID) != pid {
				t.Fatalf("message %d came from pid %d, but the current plugin is pid %d", seq, pid, g.Process().PID)
			}
			respawntest.Kill(t, g)
		}
	}
	if len(pids) != kills+1 {
		t.Errorf("answered by plugins %v, want %d: the first and one per kill", pids, kills+1)
	}
}

// TestServerStreamResumeSuccessorDies: the plugin that delivered messages
// was not killed by the request, so when the successor then dies with the
// resumed request in its handler, that is the request's first death, not
// its second: the stream goes on on a third plugin.
func TestServerStreamResumeSuccessorDies(t *testing.T) {
	h := newHost(t, nil, nil, resumeWatch)
	const count = 6
	stream := watchReceived(t, h, &testpb.WatchRequest{Id: "w", Count: count, DelayMs: 1000, IntervalMs: 20}, 3)
	respawntest.Kill(t, h.rc.Current())
	rest := make(chan error, 1)
	go func() {
		for seq := int64(3); ; seq++ {
			resp, err := stream.Recv()
			switch {
			case err == io.EOF && seq == count:
				rest <- nil
				return
			case err != nil:
				rest <- fmt.Errorf("Recv %d: %w", seq, err)
				return
			case resp.GetSeq() != seq:
				rest <- fmt.Errorf("message %d has seq %d: a gap or a repeat", seq, resp.GetSeq())
				return
			}
		}
	}()
	h.waitJournal(t, "w", 2) // the resumed stream is in the successor's handler
	respawntest.Kill(t, h.rc.Current())
	if err := <-rest; err != nil {
		t.Fatal(err)
	}
	if n := h.executions(t, "w"); n != 3 {
		t.Errorf("the stream entered %d handlers, want 3: one per plugin", n)
	}
}

// TestServerStreamResumeExhausted: a stream with WithResume that cannot be
// continued once the caller received messages ends with ErrStreamBroken,
// as without WithResume, never with an error a retry layer would take for
// a reason to start the stream again from the top.
func TestServerStreamResumeExhausted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		attempts int
		args     []string // the successors' flags; nil: none fails
	}{
		{"no attempt left", 1, nil},
		{"the successors cannot start", 3, []string{"-exit-at-start"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, nil, nil, resumeWatch, interceptor.WithLimits(interceptor.Limits{MaxAttempts: tc.attempts}))
			if tc.args != nil {
				h.swapHook(&command.Hook{Path: h.cmd.Path, Args: append(h.cmd.Args[:len(h.cmd.Args):len(h.cmd.Args)], tc.args...)})
			}
			stream := watchReceived(t, h, &testpb.WatchRequest{Id: "w", Count: 100, IntervalMs: 50}, 3)
			respawntest.Kill(t, h.rc.Current())
			var err error
			for {
				if _, err = stream.Recv(); err != nil {
					break
				}
			}
			if !errors.Is(err, interceptor.ErrStreamBroken) || status.Code(err) != codes.Aborted || interceptor.Retriable(err) {
				t.Fatalf("Recv after the kill: %v (code %v, Retriable %v), want ErrStreamBroken (Aborted, not Retriable)", err, status.Code(err), interceptor.Retriable(err))
			}
		})
	}
}
