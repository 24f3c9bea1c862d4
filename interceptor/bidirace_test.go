//go:build unix

package interceptor_test

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// TestBidiSendRecvAcrossReplay: one goroutine sends on a bidirectional
// stream while another receives, and the plugin is SIGKILLed between two
// sends, before the stream committed: the stream is re-opened under both,
// the messages sent before the kill are replayed as sent, those sent
// after go to the new plugin, and the receiver reads every answer once, in
// order. Run with -race, it also checks that the two goroutines and the
// re-open share nothing unguarded.
func TestBidiSendRecvAcrossReplay(t *testing.T) {
	h := newHost(t, nil, nil)
	ctx := respawntest.Context(t, 30*time.Second)
	stream, err := h.client.Echo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	received := make(chan []int64, 1)
	recvErr := make(chan error, 1)
	go func() {
		var seqs []int64
		for {
			resp, err := stream.Recv()
			if err == io.EOF {
				received <- seqs
				return
			}
			if err != nil {
				recvErr <- fmt.Errorf("Recv after %v: %w", seqs, err)
				return
			}
			seqs = append(seqs, resp.GetSeq())
		}
	}()

	killed := make(chan struct{})
	sendErr := make(chan error, 1)
	go func() {
		defer close(sendErr)
		// The first message is answered after 3s: the kill comes first. One
		// message object, reused for every Send.
		m := &testpb.EchoRequest{Id: "e", DelayMs: 3000}
		for seq := range int64(n) {
			if seq == n/2 {
				<-killed
			}
			m.Seq = seq
			if err := stream.Send(m); err != nil {
				sendErr <- fmt.Errorf("Send %d: %w", seq, err)
				return
			}
			m.DelayMs = 0
		}
		if err := stream.CloseSend(); err != nil {
			sendErr <- err
		}
	}()

	h.waitJournal(t, "e", 1)
	respawntest.Kill(t, h.rc.Current())
	close(killed)
	if err := <-sendErr; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-recvErr:
		t.Fatal(err)
	case got := <-received:
		if want := []int64{0, 1, 2, 3, 4, 5}; !equalSeqs(got, want) {
			t.Errorf("answered seqs %v, want %v", got, want)
		}
	}
	if got := h.rc.Stats().Respawns; got < 1 {
		t.Errorf("respawns = %d, want the stream re-opened on a new plugin", got)
	}
}
