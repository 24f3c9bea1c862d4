package interceptor_test

import (
	"fmt"
	"io"
	"testing"
	"time"

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
