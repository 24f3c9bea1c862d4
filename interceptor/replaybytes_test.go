package interceptor_test

import (
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/internal/testplugin"
)

// The tests below send every message of a stream from one message object,
// changed after each Send, as Velero's PutObject sends every chunk from one
// buffer: grpc-go has encoded a message when SendMsg returns, so the caller
// may reuse it. The plugin is SIGKILLed before the stream commits, and the
// successor must receive exactly what the caller sent.

// TestClientStreamReplaysWhatWasSent: a client stream replayed after its
// plugin died delivers to the successor the messages as they were sent.
func TestClientStreamReplaysWhatWasSent(t *testing.T) {
	h := newHost(t, nil, nil)
	ctx := respawntest.Context(t, 20*time.Second)
	stream, err := h.client.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resp := sendKillSend(t, h, stream, "u")
	if resp.GetCount() != 5 {
		t.Errorf("the plugin answered %d messages, want 5", resp.GetCount())
	}
	if got, want := lastReceived(t, h, "u"), "0,1,2,3,4"; got != want {
		t.Errorf("the plugin that answered received seqs %s, want %s", got, want)
	}
}

// TestBidiReplaysWhatWasSent: a bidirectional stream replayed after its
// plugin died delivers to the successor the messages as they were sent.
func TestBidiReplaysWhatWasSent(t *testing.T) {
	h := newHost(t, nil, nil)
	ctx := respawntest.Context(t, 20*time.Second)
	stream, err := h.client.Echo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The first message is answered after 5s: the kill comes first.
	m := &testpb.EchoRequest{Id: "e", DelayMs: 5000}
	const n = 5
	for seq := range int64(n) {
		m.Seq = seq
		if err := stream.Send(m); err != nil {
			t.Fatalf("Send %d: %v", seq, err)
		}
		m.DelayMs = 0
	}
	h.waitJournal(t, "e", 1)
	respawntest.Kill(t, h.rc.Current())
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	got := recvSeqs(t, stream.Recv)
	if want := []int64{0, 1, 2, 3, 4}; !equalSeqs(got, want) {
		t.Errorf("the successor answered seqs %v, want %v", got, want)
	}
}

// TestServerStreamReplaysWhatWasSent: a server stream re-opened before
// its first response sends the request as it was sent, even if the
// caller has changed it since.
func TestServerStreamReplaysWhatWasSent(t *testing.T) {
	h := newHost(t, nil, nil)
	ctx := respawntest.Context(t, 20*time.Second)
	req := &testpb.WatchRequest{Id: "w", Count: 3, DelayMs: 5000}
	stream, err := h.client.Watch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	h.waitJournal(t, "w", 1)
	req.From, req.DelayMs = 2, 0 // the caller reuses its request
	respawntest.Kill(t, h.rc.Current())
	got := recvSeqs(t, stream.Recv)
	if want := []int64{0, 1, 2}; !equalSeqs(got, want) {
		t.Errorf("the successor sent seqs %v, want %v", got, want)
	}
}

// TestReplayEncodesOnceWithCallersCodec: a stream's messages are encoded
// by the codec the caller chose, once each: a replay sends the bytes it
// encoded, not the messages encoded again.
func TestReplayEncodesOnceWithCallersCodec(t *testing.T) {
	h := newHost(t, nil, nil)
	ctx := respawntest.Context(t, 20*time.Second)
	codec := &countingCodec{CodecV2: encoding.GetCodecV2("proto")}
	stream, err := h.client.Collect(ctx, grpc.ForceCodecV2(codec))
	if err != nil {
		t.Fatal(err)
	}
	sendKillSend(t, h, stream, "k")
	if got, want := lastReceived(t, h, "k"), "0,1,2,3,4"; got != want {
		t.Errorf("the plugin that answered received seqs %s, want %s", got, want)
	}
	if n := codec.marshals.Load(); n != 5 {
		t.Errorf("the caller's codec encoded %d messages, want 5: each of the 5 sent, once", n)
	}
}

// sendKillSend sends seqs 0 to 3 of upload id on stream from one message
// object, SIGKILLs the plugin once it has received the first, sends seq 4
// from the same object and returns the answer.
func sendKillSend(t *testing.T, h *host, stream grpc.ClientStreamingClient[testpb.CollectRequest, testpb.CollectResponse], id string) *testpb.CollectResponse {
	t.Helper()
	m := &testpb.CollectRequest{Id: id}
	for seq := range int64(4) {
		m.Seq = seq
		if err := stream.Send(m); err != nil {
			t.Fatalf("Send %d: %v", seq, err)
		}
	}
	h.waitJournal(t, id, 1)
	respawntest.Kill(t, h.rc.Current())
	m.Seq = 4
	if err := stream.Send(m); err != nil {
		t.Fatalf("Send after the kill: %v", err)
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		t.Fatalf("CloseAndRecv: %v", err)
	}
	return resp
}

// recvSeqs receives until io.EOF and returns the seqs received.
func recvSeqs[M interface{ GetSeq() int64 }](t *testing.T, recv func() (M, error)) []int64 {
	t.Helper()
	var got []int64
	for {
		resp, err := recv()
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatalf("Recv after %v: %v", got, err)
		}
		got = append(got, resp.GetSeq())
	}
}

// countingCodec is the proto codec, counting the messages it encodes.
type countingCodec struct {
	encoding.CodecV2
	marshals atomic.Int64
}

func (c *countingCodec) Marshal(v any) (mem.BufferSlice, error) {
	c.marshals.Add(1)
	return c.CodecV2.Marshal(v)
}

// lastReceived returns the seqs that the last Collect of id to answer
// received, as testplugin journals them.
func lastReceived(t *testing.T, h *host, id string) string {
	t.Helper()
	data, err := os.ReadFile(h.journal + testplugin.ReceivedSuffix)
	if err != nil {
		t.Fatal(err)
	}
	last := ""
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == id {
			last = f[1]
		}
	}
	return last
}

func equalSeqs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
