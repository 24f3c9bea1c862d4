package interceptor_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// TestCommitRuleRowByRow: the commit rule of the package documentation,
// row by row, with a real plugin SIGKILLed right after the event: a
// stream that the event commits ends with a verdict (or its own end) and
// runs once; one that it does not commit is re-opened on the successor,
// which answers.
func TestCommitRuleRowByRow(t *testing.T) {
	watch := func(req *testpb.WatchRequest) func(context.Context, testpb.TestClient) (grpc.ClientStream, error) {
		return func(ctx context.Context, c testpb.TestClient) (grpc.ClientStream, error) { return c.Watch(ctx, req) }
	}
	collect := func(id string) func(context.Context, testpb.TestClient) (grpc.ClientStream, error) {
		return func(ctx context.Context, c testpb.TestClient) (grpc.ClientStream, error) {
			s, err := c.Collect(ctx)
			if err != nil {
				return nil, err
			}
			return s, s.Send(&testpb.CollectRequest{Id: id})
		}
	}
	// recvCollect closes a Collect stream's side and reads its answer.
	recvCollect := func(s grpc.ClientStream) (int64, error) {
		if err := s.CloseSend(); err != nil {
			return 0, err
		}
		m := new(testpb.CollectResponse)
		err := s.RecvMsg(m)
		return m.GetPid(), err
	}
	header := func(t *testing.T, s grpc.ClientStream) {
		if md, err := s.Header(); err != nil || len(md.Get("pid")) == 0 {
			t.Fatalf("Header: %v, %v; want the plugin's header", md, err)
		}
	}
	takeContext := func(t *testing.T, s grpc.ClientStream) { _ = s.Context() }
	message := func(recv func(grpc.ClientStream) (int64, error)) func(*testing.T, grpc.ClientStream) {
		return func(t *testing.T, s grpc.ClientStream) {
			if _, err := recv(s); err != nil {
				t.Fatalf("the first message: %v", err)
			}
		}
	}
	ended := func(recv func(grpc.ClientStream) (int64, error)) func(*testing.T, grpc.ClientStream) {
		return func(t *testing.T, s grpc.ClientStream) {
			if _, err := recv(s); err != io.EOF {
				t.Fatalf("the stream's end: %v, want io.EOF", err)
			}
		}
	}
	none := func(*testing.T, grpc.ClientStream) {}
	verdict := func(err error) bool {
		return errors.Is(err, interceptor.ErrOutcomeUnknown) || errors.Is(err, interceptor.ErrStreamBroken)
	}
	eof := func(err error) bool { return err == io.EOF }
	small := []interceptor.Option{interceptor.WithLimits(interceptor.Limits{ReplayBuffer: 8})}
	headerPID := []string{"-header-pid"}
	for _, tc := range []struct {
		name  string
		args  []string
		opts  []interceptor.Option
		id    string
		open  func(context.Context, testpb.TestClient) (grpc.ClientStream, error)
		event func(*testing.T, grpc.ClientStream)
		recv  func(grpc.ClientStream) (int64, error)
		// commits: the error after the kill, if the event commits.
		commits func(error) bool
	}{
		{"server/header", headerPID, nil, "sh", watch(&testpb.WatchRequest{Id: "sh", DelayMs: 2000, Count: 1}), header, recvWatch, nil},
		{"server/message", nil, nil, "sm", watch(&testpb.WatchRequest{Id: "sm", Count: 2, IntervalMs: 5000}), message(recvWatch), recvWatch, verdict},
		{"server/end", nil, nil, "se", watch(&testpb.WatchRequest{Id: "se"}), ended(recvWatch), recvWatch, eof},
		{"server/context", nil, nil, "sc", watch(&testpb.WatchRequest{Id: "sc", DelayMs: 2000, Count: 1}), takeContext, recvWatch, nil},
		{"client/header", headerPID, nil, "ch", collect("ch"), header, recvCollect, verdict},
		{"client/context", nil, nil, "cc", collect("cc"), takeContext, recvCollect, nil},
		{"client/buffer full", nil, small, "cb", collect("cb"), none, recvCollect, verdict},
		{"bidi/header", headerPID, nil, "bh", echoClosed(&testpb.EchoRequest{Id: "bh", DelayMs: 5000}), header, recvEcho, verdict},
		{"bidi/message", nil, nil, "bm", echoClosed(&testpb.EchoRequest{Id: "bm"}, &testpb.EchoRequest{Id: "bm", DelayMs: 5000}), message(recvEcho), recvEcho, verdict},
		{"bidi/end", nil, nil, "be", echoClosed(&testpb.EchoRequest{Id: "be"}), func(t *testing.T, s grpc.ClientStream) {
			message(recvEcho)(t, s)
			ended(recvEcho)(t, s)
		}, recvEcho, eof},
		{"bidi/context", nil, nil, "bc", echoClosed(&testpb.EchoRequest{Id: "bc", DelayMs: 2000}), takeContext, recvEcho, nil},
		{"bidi/buffer full", nil, small, "bb", echoClosed(&testpb.EchoRequest{Id: "bb", DelayMs: 5000}), none, recvEcho, verdict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, tc.args, nil, tc.opts...)
			old := int64(h.rc.Current().Process().PID)
			s, err := tc.open(respawntest.Context(t, 20*time.Second), h.client)
			if err != nil {
				t.Fatal(err)
			}
			h.waitJournal(t, tc.id, 1)
			tc.event(t, s)
			respawntest.Kill(t, h.rc.Current())
			pid, err := tc.recv(s)
			runs := 2
			if tc.commits != nil {
				if !tc.commits(err) {
					t.Errorf("after the kill: %v; the event commits the stream: want its verdict, or its own end", err)
				}
				runs = 1
			} else if err != nil || pid == old {
				t.Errorf("after the kill: pid %d, %v; the event does not commit the stream: want the successor's answer", pid, err)
			}
			if n := h.executions(t, tc.id); n != runs {
				t.Errorf("the stream ran %d times, want %d", n, runs)
			}
		})
	}
}
