package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// successor makes later respawns run the host's plugin with args added.
func (h *host) successor(args ...string) {
	h.swapHook(&command.Hook{Path: h.cmd.Path, Args: append(slices.Clone(h.cmd.Args), args...)})
}

// headerPID returns the pid a -header-pid plugin put in md.
func headerPID(t *testing.T, md metadata.MD) int64 {
	t.Helper()
	v := md.Get("pid")
	if len(v) != 1 {
		t.Fatalf("header %v has no pid", md)
	}
	pid, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// echoClosed opens an Echo stream, sends reqs and closes the send side.
func echoClosed(reqs ...*testpb.EchoRequest) func(ctx context.Context, c testpb.TestClient) (grpc.ClientStream, error) {
	return func(ctx context.Context, c testpb.TestClient) (grpc.ClientStream, error) {
		s, err := c.Echo(ctx)
		if err != nil {
			return nil, err
		}
		for _, req := range reqs {
			if err := s.Send(req); err != nil {
				return nil, err
			}
		}
		return s, s.CloseSend()
	}
}

// recvEcho receives one answer of an Echo stream, and reports its pid.
func recvEcho(s grpc.ClientStream) (int64, error) {
	m := new(testpb.EchoResponse)
	err := s.RecvMsg(m)
	return m.GetPid(), err
}

// recvWatch receives one answer of a Watch stream, and reports its pid.
func recvWatch(s grpc.ClientStream) (int64, error) {
	m := new(testpb.WatchResponse)
	err := s.RecvMsg(m)
	return m.GetPid(), err
}

// goroutinesIn returns how many goroutines have fn on their stack.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			count++
		}
	}
	return count
}

// waitGoroutines waits until want goroutines have fn on their stack, and
// fails t if that does not happen within 10s: goroutines end on their own
// schedule, so this is polled.
func waitGoroutines(t *testing.T, fn string, want func(int) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := goroutinesIn(fn)
		if want(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines in %s after 10s: want %s", n, fn, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStreamHeaderOfKilledAttempt: a stream whose plugin dies before it
// sent a header gets grpc-go's nil header, which is no header: an
// idempotent stream is re-opened, and Header returns the successor's; a
// stream that cannot be replayed is not committed by it either.
func TestStreamHeaderOfKilledAttempt(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(ctx context.Context, c testpb.TestClient) (grpc.ClientStream, error)
		// recv receives one answer, and reports its pid.
		recv func(s grpc.ClientStream) (int64, error)
		// replayed: the stream goes on on the successor.
		replayed bool
	}{
		{"bidi", echoClosed(&testpb.EchoRequest{Id: "bidi", DelayMs: 2000}), recvEcho, true},
		{"server", func(ctx context.Context, c testpb.TestClient) (grpc.ClientStream, error) {
			return c.Watch(ctx, &testpb.WatchRequest{Id: "server", DelayMs: 2000, Count: 1})
		}, recvWatch, true},
		{"bidi not idempotent", func(ctx context.Context, c testpb.TestClient) (grpc.ClientStream, error) {
			s, err := c.Echo(ctx, interceptor.Idempotent(false))
			if err != nil {
				return nil, err
			}
			return s, s.Send(&testpb.EchoRequest{Id: "bidi not idempotent", DelayMs: 2000})
		}, recvEcho, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, nil, nil)
			old := int64(h.rc.Current().Process().PID)
			ctx := respawntest.Context(t, 20*time.Second)
			s, err := tc.open(ctx, h.client)
			if err != nil {
				t.Fatal(err)
			}
			h.waitJournal(t, tc.name, 1)
			h.successor("-header-pid")
			respawntest.Kill(t, h.rc.Current())
			md, err := s.Header()
			if err != nil {
				t.Fatalf("Header: %v", err)
			}
			if !tc.replayed {
				if md != nil {
					t.Errorf("Header: %v, want none: the plugin died before it sent one", md)
				}
				_, err := tc.recv(s)
				var unknown *interceptor.OutcomeUnknownError
				if !errors.As(err, &unknown) || unknown.Reason != interceptor.NotIdempotent {
					t.Fatalf("Recv: %v, want ErrOutcomeUnknown (not idempotent): nothing came from the plugin, so nothing committed it", err)
				}
				return
			}
			if md == nil {
				t.Fatal("Header: none, want the successor's: grpc-go's nil header of the killed attempt was handed out")
			}
			if pid := headerPID(t, md); pid == old {
				t.Errorf("header from pid %d, the killed plugin", pid)
			}
			pid, err := tc.recv(s)
			if err != nil || pid == old {
				t.Fatalf("Recv: pid %d, %v; want the successor's answer", pid, err)
			}
			if _, err := tc.recv(s); err != io.EOF {
				t.Errorf("Recv after the answer: %v, want io.EOF", err)
			}
		})
	}
}

// TestClientStreamReplayEndedBySuccessor: a replay that the successor cuts
// short, by answering and closing the stream while the replay still sends,
// gives the caller the successor's answer.
func TestClientStreamReplayEndedBySuccessor(t *testing.T) {
	h := newHost(t, nil, nil, interceptor.WithLimits(interceptor.Limits{ReplayBuffer: 16 << 20}))
	old := int64(h.rc.Current().Process().PID)
	ctx := respawntest.Context(t, 20*time.Second)
	stream, err := h.client.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The successor answers at the first message; the replay of the
	// others, more than the stream's flow-control window, is still being
	// sent when it closes.
	if err := stream.Send(&testpb.CollectRequest{Id: "early", Seq: 0}); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 32<<10)
	for seq := int64(1); seq <= 32; seq++ {
		if err := stream.Send(&testpb.CollectRequest{Id: pad, Seq: seq}); err != nil {
			t.Fatalf("Send %d: %v", seq, err)
		}
	}
	h.waitJournal(t, "early", 1)
	h.successor("-collect-answer-after", "1")
	respawntest.Kill(t, h.rc.Current())
	resp, err := stream.CloseAndRecv()
	if err != nil {
		t.Fatalf("CloseAndRecv: %v, want the successor's answer", err)
	}
	if resp.GetPid() == old || resp.GetCount() != 1 {
		t.Errorf("answer: %d messages, by pid %d; want 1, by the successor (not %d)", resp.GetCount(), resp.GetPid(), old)
	}
}

// TestStreamContextOutlivesReplay: the Context of a stream, taken before its
// plugin died, is not ended by the replay on the successor; it ends with
// the stream, and carries the current attempt's peer.
func TestStreamContextOutlivesReplay(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(ctx context.Context, c testpb.TestClient) (grpc.ClientStream, error)
		recv func(s grpc.ClientStream) (int64, error)
	}{
		// The first answer waits: the kill comes first.
		{"bidi", echoClosed(&testpb.EchoRequest{Id: "bidi", Seq: 0, DelayMs: 2000}, &testpb.EchoRequest{Id: "bidi", Seq: 1}), recvEcho},
		{"server", func(ctx context.Context, c testpb.TestClient) (grpc.ClientStream, error) {
			return c.Watch(ctx, &testpb.WatchRequest{Id: "server", DelayMs: 2000, Count: 2})
		}, recvWatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, nil, nil)
			old := int64(h.rc.Current().Process().PID)
			s, err := tc.open(respawntest.Context(t, 20*time.Second), h.client)
			if err != nil {
				t.Fatal(err)
			}
			sctx := s.Context()
			h.waitJournal(t, tc.name, 1)
			respawntest.Kill(t, h.rc.Current())
			for i := range 2 {
				pid, err := tc.recv(s)
				if err != nil || pid == old {
					t.Fatalf("Recv %d: pid %d, %v; want an answer from the successor", i, pid, err)
				}
				if err := sctx.Err(); err != nil {
					t.Fatalf("after answer %d from the successor, the stream's Context has ended: %v", i, err)
				}
			}
			if _, ok := peer.FromContext(sctx); !ok {
				t.Error("the stream's Context has no peer")
			}
			if _, err := tc.recv(s); err != io.EOF {
				t.Fatalf("Recv after the answers: %v, want io.EOF", err)
			}
			select {
			case <-sctx.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the stream's Context did not end with the stream")
			}
		})
	}
}

// TestReplayedStreamsLeaveNoGoroutine: a stream replayed on the successor
// ends its attempt once it has its answer: nothing of it waits for the
// plugin's exit or the caller's ctx. Client streams, whose one answer is
// their end, left one goroutine each; bidi and server streams are checked
// beside them.
func TestReplayedStreamsLeaveNoGoroutine(t *testing.T) {
	h := newHost(t, nil, nil)
	old := int64(h.rc.Current().Process().PID)
	ctx := respawntest.Context(t, 20*time.Second)
	var finish []func() error // each ends one stream, replayed
	answered := func(kind string, pid int64, err error) error {
		if err != nil || pid == old {
			return fmt.Errorf("%s: answer by pid %d, %v; want one by the successor", kind, pid, err)
		}
		return nil
	}
	for i := range 4 {
		s, err := h.client.Collect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		id := "collect-" + strconv.Itoa(i)
		if err := s.Send(&testpb.CollectRequest{Id: id}); err != nil {
			t.Fatal(err)
		}
		h.waitJournal(t, id, 1)
		finish = append(finish, func() error {
			if err := s.Send(&testpb.CollectRequest{Id: id, Seq: 1}); err != nil {
				return err
			}
			resp, err := s.CloseAndRecv()
			if err == nil && resp.GetCount() != 2 {
				err = fmt.Errorf("%d messages, want 2", resp.GetCount())
			}
			return answered(id, resp.GetPid(), err)
		})
	}
	echo, err := h.client.Echo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := echo.Send(&testpb.EchoRequest{Id: "echo", DelayMs: 2000}); err != nil {
		t.Fatal(err)
	}
	h.waitJournal(t, "echo", 1)
	finish = append(finish, func() error {
		if err := echo.CloseSend(); err != nil {
			return err
		}
		resp, err := echo.Recv()
		if err := answered("echo", resp.GetPid(), err); err != nil {
			return err
		}
		if _, err := echo.Recv(); err != io.EOF {
			return fmt.Errorf("echo: %v after the answer, want io.EOF", err)
		}
		return nil
	})
	watch, err := h.client.Watch(ctx, &testpb.WatchRequest{Id: "watch", DelayMs: 2000, Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	h.waitJournal(t, "watch", 1)
	finish = append(finish, func() error {
		resp, err := watch.Recv()
		if err := answered("watch", resp.GetPid(), err); err != nil {
			return err
		}
		if _, err := watch.Recv(); err != io.EOF {
			return fmt.Errorf("watch: %v after the answer, want io.EOF", err)
		}
		return nil
	})
	respawntest.Kill(t, h.rc.Current())
	for _, f := range finish {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	// The ctx and the successor live on: what ends the attempts must be
	// the streams' own end.
	waitGoroutines(t, "respawn/interceptor.attemptContext", func(n int) bool { return n == 0 }, "none")
}

// TestSendEOFDoesNotBlockRecv: a SendMsg that finds its stream ended by the
// live plugin (io.EOF), with more answers to read than the stream may hold
// (Limits.ReplayBuffer), weighs the evidence of a death without holding
// the stream: RecvMsg reads the answers meanwhile, and that ends the wait.
func TestSendEOFDoesNotBlockRecv(t *testing.T) {
	// 1000 messages of 8 bytes fit in the replay log (16 KiB as
	// allocated, with room for 1000 more sent before SendMsg finds the
	// stream ended), but not their 1000 answers of 12 bytes as read ahead
	// (24 more each).
	const n = 1000
	ended := &rpcSignal[*stats.InTrailer]{method: testpb.Test_Echo_FullMethodName, c: make(chan struct{}, 1)}
	h := newHost(t, []string{"-echo-end-after", strconv.Itoa(n)}, []redial.Option{redial.WithDialOptions(grpc.WithStatsHandler(ended))},
		interceptor.WithLimits(interceptor.Limits{EvidenceWait: time.Hour, ReplayBuffer: 30000}))
	pid := int64(h.rc.Current().Process().PID)
	stream, err := h.client.Echo(respawntest.Context(t, 60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for seq := int64(1); seq <= n; seq++ {
		if err := stream.Send(&testpb.EchoRequest{Id: "eof", Seq: seq}); err != nil {
			t.Fatalf("Send %d: %v", seq, err)
		}
	}
	h.waitJournal(t, "eof/ended", 1)
	// The host's transport has read the end, so that a Send finds it
	// within the 1000 below: on a loaded host the trailers can be read
	// after 1000 Sends, which the window lets through at once.
	select {
	case <-ended.c:
	case <-time.After(20 * time.Second):
		t.Fatal("the host's transport did not read the stream's trailers within 20s")
	}
	sent := make(chan error, 1)
	go func() {
		for range 1000 {
			if err := stream.Send(&testpb.EchoRequest{Id: "eof"}); err != nil {
				sent <- err
				return
			}
		}
		sent <- errors.New("1000 messages sent to a stream that had ended")
	}()
	// SendMsg found the stream ended and weighs the evidence.
	waitGoroutines(t, "respawn/interceptor.gather", func(n int) bool { return n > 0 }, "one")
	recvd := make(chan error, 1)
	go func() {
		for seq := int64(1); seq <= n; seq++ {
			resp, err := stream.Recv()
			if err != nil || resp.GetSeq() != seq || resp.GetPid() != pid {
				recvd <- fmt.Errorf("answer %d: %v by pid %d, %v; want the plugin's, by %d", seq, resp, resp.GetPid(), err, pid)
				return
			}
		}
		_, err := stream.Recv()
		if status.Code(err) != codes.Aborted {
			recvd <- fmt.Errorf("Recv: %v, want the plugin's Aborted", err)
			return
		}
		recvd <- nil
	}()
	select {
	case err := <-recvd:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("RecvMsg is blocked while SendMsg waits for evidence of a death")
	}
	select {
	case err := <-sent:
		if err != io.EOF {
			t.Errorf("SendMsg: %v, want io.EOF", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("SendMsg still waits for evidence after RecvMsg read the answers")
	}
	if n := h.executions(t, "eof"); n != 1 {
		t.Errorf("the stream ran %d times, want 1", n)
	}
	if err := h.rc.Close(); err != nil {
		t.Fatal(err)
	}
	h.events.Wait(t, redial.EventClosed, 0, 1) // the last event: the others have been seen
	if n := h.rc.Stats().Respawns; n != 0 {
		t.Errorf("%d respawns of a live plugin", n)
	}
}

// TestFailedStreamJudgedOnce: a stream that respawn gave a verdict on keeps
// it: later calls return the same error, without another judgement (no new
// event, no new count).
func TestFailedStreamJudgedOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []interceptor.Option
		// fail runs the stream until the kill, kills, and returns the
		// first error and a call to make again.
		fail func(t *testing.T, h *host, ctx context.Context) ([]func() error, error)
		// unknown: the verdict is an outcome unknown.
		unknown bool
	}{
		{"bidi not idempotent", nil, func(t *testing.T, h *host, ctx context.Context) ([]func() error, error) {
			s, err := h.client.Echo(ctx, interceptor.Idempotent(false))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Send(&testpb.EchoRequest{Id: "j", DelayMs: 5000}); err != nil {
				t.Fatal(err)
			}
			h.waitJournal(t, "j", 1)
			respawntest.Kill(t, h.rc.Current())
			_, err = s.Recv()
			send := func() error { return s.Send(&testpb.EchoRequest{Id: "j", Seq: 1}) }
			recv := func() error { _, err := s.Recv(); return err }
			return []func() error{send, recv, send, recv}, err
		}, true},
		{"client past the replay buffer", []interceptor.Option{interceptor.WithLimits(interceptor.Limits{ReplayBuffer: 8})}, func(t *testing.T, h *host, ctx context.Context) ([]func() error, error) {
			s, err := h.client.Collect(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Send(&testpb.CollectRequest{Id: "j-client-stream"}); err != nil {
				t.Fatal(err)
			}
			h.waitJournal(t, "j-client-stream", 1)
			respawntest.Kill(t, h.rc.Current())
			_, err = s.CloseAndRecv()
			recv := func() error { return s.RecvMsg(new(testpb.CollectResponse)) }
			return []func() error{recv, recv}, err
		}, true},
		{"server after a message", nil, func(t *testing.T, h *host, ctx context.Context) ([]func() error, error) {
			s, err := h.client.Watch(ctx, &testpb.WatchRequest{Count: 3, IntervalMs: 5000})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Recv(); err != nil {
				t.Fatal(err)
			}
			respawntest.Kill(t, h.rc.Current())
			_, err = s.Recv()
			recv := func() error { _, err := s.Recv(); return err }
			return []func() error{recv, recv}, err
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, nil, nil, tc.opts...)
			ctx := respawntest.Context(t, 20*time.Second)
			again, first := tc.fail(t, h, ctx)
			if first == nil {
				t.Fatal("the stream did not fail when its plugin died")
			}
			if tc.unknown && !errors.Is(first, interceptor.ErrOutcomeUnknown) {
				t.Fatalf("first error %v, want ErrOutcomeUnknown", first)
			}
			for i, call := range again {
				if err := call(); err != first {
					t.Errorf("call %d after the verdict: %v, want the verdict again: %v", i, err, first)
				}
			}
			if _, err := h.client.Get(ctx, &testpb.GetRequest{}); err != nil {
				t.Fatalf("the next call: %v", err)
			}
			h.events.Wait(t, redial.EventRespawnDone, 2, 1)
			if err := h.rc.Close(); err != nil {
				t.Fatal(err)
			}
			h.events.Wait(t, redial.EventClosed, 0, 1) // the last event: the others have been seen
			if n := h.rc.Stats().Respawns; n != 1 {
				t.Errorf("%d respawns, want 1", n)
			}
			want := uint64(0)
			if tc.unknown {
				want = 1
			}
			if n := h.rc.Stats().OutcomeUnknown; n != want {
				t.Errorf("Stats.OutcomeUnknown = %d, want %d: one stream, one verdict", n, want)
			}
			if n := h.events.Count(redial.EventOutcomeUnknown, 0); n > int(want) {
				t.Errorf("%d outcome-unknown events, want %d", n, want)
			}
		})
	}
}

// TestHeaderWhileRecvMsgWaits: a Header called while another goroutine
// waits in RecvMsg, on a stream whose plugin died before its header,
// returns the successor's header as soon as it is sent, not when the
// first message comes (here: never, before the ctx ends).
func TestHeaderWhileRecvMsgWaits(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(ctx context.Context, c testpb.TestClient) (grpc.ClientStream, any, error)
	}{
		{"bidi", func(ctx context.Context, c testpb.TestClient) (grpc.ClientStream, any, error) {
			s, err := c.Echo(ctx)
			if err != nil {
				return nil, nil, err
			}
			return s, new(testpb.EchoResponse), s.Send(&testpb.EchoRequest{Id: "bidi", DelayMs: 60000})
		}},
		{"server", func(ctx context.Context, c testpb.TestClient) (grpc.ClientStream, any, error) {
			s, err := c.Watch(ctx, &testpb.WatchRequest{Id: "server", DelayMs: 60000, Count: 1})
			return s, new(testpb.WatchResponse), err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, nil, nil)
			old := int64(h.rc.Current().Process().PID)
			ctx, cancel := context.WithCancel(respawntest.Context(t, 20*time.Second))
			defer cancel()
			s, m, err := tc.open(ctx, h.client)
			if err != nil {
				t.Fatal(err)
			}
			h.waitJournal(t, tc.name, 1)
			recvd := make(chan error, 1)
			go func() { recvd <- s.RecvMsg(m) }()
			h.successor("-header-pid")
			respawntest.Kill(t, h.rc.Current())
			md, err := s.Header()
			if err != nil || md == nil {
				t.Fatalf("Header: %v, %v; want the successor's header", md, err)
			}
			if pid := headerPID(t, md); pid == old {
				t.Errorf("header from pid %d, the killed plugin", pid)
			}
			select {
			case err := <-recvd:
				t.Fatalf("RecvMsg returned %v before the successor sent a message", err)
			default:
			}
			cancel()
			select {
			case <-recvd:
			case <-time.After(10 * time.Second):
				t.Fatal("RecvMsg did not return after the ctx ended")
			}
		})
	}
}
