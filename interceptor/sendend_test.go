package interceptor_test

import (
	"fmt"
	"io"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// TestStreamAnsweredUnderSendIsThePluginsOwn: a live plugin that answers a
// client stream (header, message, trailers) while the caller still sends,
// and one that ends a bidirectional stream with its own status after some
// messages: SendMsg returns io.EOF at once, and RecvMsg then gives the
// plugin's messages and its status, as grpc-go does. With an evidence wait
// far longer than the caller's deadline, a SendMsg that waited would end
// with its ctx.
func TestStreamAnsweredUnderSendIsThePluginsOwn(t *testing.T) {
	limits := interceptor.WithLimits(interceptor.Limits{EvidenceWait: time.Hour})
	for _, led := range []bool{false, true} {
		name, iopts, copts := "client stream", []interceptor.Option{limits}, []grpc.CallOption(nil)
		if led {
			// Not idempotent, so kept in the plugins' ledgers: a header
			// does not commit it.
			name = "ledgered client stream"
			iopts, copts = append(iopts, interceptor.WithLedger()), []grpc.CallOption{interceptor.Idempotent(false)}
		}
		t.Run(name, func(t *testing.T) { testClientStreamAnsweredUnderSend(t, iopts, copts) })
	}
	t.Run("bidirectional stream", func(t *testing.T) {
		h := newHost(t, []string{"-echo-end-after", "3", "-header-pid"}, nil, limits)
		ctx := respawntest.Context(t, 10*time.Second)
		s, err := h.client.Echo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seq := int64(0)
		err = sendUntilEnded(func() error {
			seq++
			return s.Send(&testpb.EchoRequest{Id: "e", Seq: seq})
		})
		if err != io.EOF {
			t.Fatalf("Send: %v, want io.EOF once the plugin ended the stream", err)
		}
		if ctx.Err() != nil {
			t.Fatal("Send returned once its ctx had ended: it waited for evidence")
		}
		if err := s.Context().Err(); err != nil {
			t.Errorf("the stream's Context ended (%v) before its end was returned", err)
		}
		if err := recvEchoes(s, 3); err != nil {
			t.Fatal(err)
		}
		for range 2 { // grpc-go gives the end again
			_, err = s.Recv()
			if st := status.Convert(err); st.Code() != codes.Aborted || st.Message() != "echo: ended after 3 messages" {
				t.Errorf("Recv: %v, want the plugin's Aborted", err)
			}
		}
		if got := s.Trailer().Get("echoed"); len(got) != 1 || got[0] != "3" {
			t.Errorf("trailer echoed %q, want 3", got)
		}
		if s.Context().Err() == nil {
			t.Error("the stream's Context lives on after its end was returned")
		}
		if st := h.rc.Stats(); st.Respawns != 0 || st.Retries != 0 {
			t.Errorf("stats %+v, want no respawn, no retry", st)
		}
	})
}

// testClientStreamAnsweredUnderSend runs a Collect that the plugin answers
// after 3 messages while the caller sends: the client stream case of
// TestStreamAnsweredUnderSendIsThePluginsOwn.
func testClientStreamAnsweredUnderSend(t *testing.T, iopts []interceptor.Option, copts []grpc.CallOption) {
	h := newHost(t, []string{"-collect-answer-after", "3", "-header-pid"}, nil, iopts...)
	ctx := respawntest.Context(t, 10*time.Second)
	s, err := h.client.Collect(ctx, copts...)
	if err != nil {
		t.Fatal(err)
	}
	if err = sendUntilEnded(func() error { return s.Send(&testpb.CollectRequest{Id: "c"}) }); err != io.EOF {
		t.Fatalf("Send: %v, want io.EOF once the plugin ended the stream", err)
	}
	resp, err := s.CloseAndRecv()
	if ctx.Err() != nil {
		t.Fatalf("the stream returned once its ctx had ended (%v): it waited for evidence", err)
	}
	if err != nil || resp.GetCount() != 3 || resp.GetId() != "c" {
		t.Errorf("CloseAndRecv: %v, %v; want the plugin's answer after 3 messages", resp, err)
	}
	if md, err := s.Header(); err != nil || len(md.Get("pid")) != 1 {
		t.Errorf("Header: %v, %v; want the plugin's", md, err)
	}
	if st := h.rc.Stats(); st.Respawns != 0 || st.Retries != 0 {
		t.Errorf("stats %+v, want no respawn, no retry", st)
	}
}

// TestStreamAnsweredUnderSendReadMeanwhile: a RecvMsg that reads while
// SendMsg finds the stream ended and reads its end gets every message
// once, in order, then the plugin's status.
func TestStreamAnsweredUnderSendReadMeanwhile(t *testing.T) {
	const n = 50
	h := newHost(t, []string{"-echo-end-after", strconv.Itoa(n)}, nil, interceptor.WithLimits(interceptor.Limits{EvidenceWait: time.Hour}))
	for round := range 20 {
		ctx := respawntest.Context(t, 10*time.Second)
		s, err := h.client.Echo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		recvd := make(chan error, 1)
		go func() { recvd <- recvEchoes(s, n) }()
		seq := int64(0)
		err = sendUntilEnded(func() error {
			seq++
			return s.Send(&testpb.EchoRequest{Id: "r", Seq: seq})
		})
		if err != io.EOF {
			t.Fatalf("round %d: Send: %v, want io.EOF once the plugin ended the stream", round, err)
		}
		if err := <-recvd; err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	if st := h.rc.Stats(); st.Respawns != 0 || st.Retries != 0 {
		t.Errorf("stats %+v, want no respawn, no retry", st)
	}
}

// TestStreamKilledAfterHeaderUnderSendIsReplayed: a plugin SIGKILLed
// after it sent a client stream's header, while the caller sends: the
// stream is re-opened on the successor and what was sent sent again, and
// the caller, which stops sending at io.EOF, gets the answer to all it
// meant to send, never one to a part of it.
func TestStreamKilledAfterHeaderUnderSendIsReplayed(t *testing.T) {
	h := newHost(t, []string{"-header-pid"}, nil)
	ctx := respawntest.Context(t, 20*time.Second)
	s, err := h.client.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const total = 200
	if err := s.Send(&testpb.CollectRequest{Id: "k", Seq: 1}); err != nil {
		t.Fatal(err)
	}
	h.waitJournal(t, "k", 1) // in its handler, its header sent
	g := h.rc.Current()
	respawntest.Kill(t, g) // and waits until it is reaped
	sent := 1
	for seq := int64(2); seq <= total; seq++ {
		if err := s.Send(&testpb.CollectRequest{Id: "k", Seq: seq}); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("Send %d: %v", seq, err)
		}
		sent++
	}
	resp, err := s.CloseAndRecv()
	if err != nil {
		t.Fatalf("CloseAndRecv: %v", err)
	}
	if resp.GetCount() != total || resp.GetPid() == int64(g.Process().PID) {
		t.Errorf("answered %d of %d messages (the caller sent %d) by pid %d (the killed one: %d): the upload was cut", resp.GetCount(), total, sent, resp.GetPid(), g.Process().PID)
	}
}

// sendUntilEnded calls send until it fails, at most 100000 times, and
// returns its error.
func sendUntilEnded(send func() error) error {
	for range 100000 {
		if err := send(); err != nil {
			return err
		}
	}
	return status.Error(codes.Unknown, "the stream never ended: "+strconv.Itoa(100000)+" messages sent")
}

// recvEchoes receives the answers to messages 1 to n of s, in order, and
// then the plugin's Aborted (testplugin's -echo-end-after).
func recvEchoes(s grpc.BidiStreamingClient[testpb.EchoRequest, testpb.EchoResponse], n int64) error {
	for want := int64(1); want <= n; want++ {
		if resp, err := s.Recv(); err != nil || resp.GetSeq() != want {
			return fmt.Errorf("Recv: %v, %v; want the answer to message %d", resp, err, want)
		}
	}
	_, err := s.Recv()
	if st := status.Convert(err); st.Code() != codes.Aborted || st.Message() != fmt.Sprintf("echo: ended after %d messages", n) {
		return fmt.Errorf("Recv: %v, want the plugin's Aborted", err)
	}
	return nil
}
