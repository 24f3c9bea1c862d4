package interceptor_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// TestReplayBufferCountsEmptyMessages: a message that encodes to nothing
// still costs the replay buffer at least what grpc-go's own retry buffer
// charges for it (5 bytes, its frame header), so an uncommitted client
// stream of empty messages passes the bound and commits: its plugin's death
// is then an outcome unknown, not a replay of all it sent.
func TestReplayBufferCountsEmptyMessages(t *testing.T) {
	const (
		buffer      = 4 << 10
		frameHeader = 5
		n           = buffer/frameHeader + 1
	)
	h := newHost(t, nil, nil, interceptor.WithLimits(interceptor.Limits{ReplayBuffer: buffer}))
	ctx := respawntest.Context(t, 20*time.Second)
	stream, err := h.client.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&testpb.CollectRequest{Id: "c"}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < n; i++ {
		if err := stream.Send(&testpb.CollectRequest{}); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	h.waitJournal(t, "c", 1)
	respawntest.Kill(t, h.rc.Current())
	_, err = stream.CloseAndRecv()
	var unknown *interceptor.OutcomeUnknownError
	if !errors.As(err, &unknown) || unknown.Reason != interceptor.Committed {
		t.Fatalf("CloseAndRecv after the kill: %v, want ErrOutcomeUnknown (committed): %d messages are past a %d-byte buffer", err, n, buffer)
	}
	if n := h.executions(t, "c"); n != 1 {
		t.Errorf("the stream ran %d times, want 1", n)
	}
}

// BenchmarkReplayBufferHeap measures the heap an uncommitted client stream
// of 400,000 empty messages holds, through respawn (default replay buffer)
// and straight through grpc-go, with a real plugin: heap-B/stream is the
// live heap after the sends less the live heap before the stream opened.
// grpc-go's own transport queue (frames not yet written) is in both.
func BenchmarkReplayBufferHeap(b *testing.B) {
	const n = 400_000
	bin := plugintest.BuildOnce(b)
	run := func(b *testing.B, client testpb.TestClient) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var held int64
		for range b.N {
			before := liveHeap()
			stream, err := client.Collect(ctx)
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < n; i++ {
				if err := stream.Send(&testpb.CollectRequest{}); err != nil {
					b.Fatalf("Send %d: %v", i, err)
				}
			}
			held += liveHeap() - before
			if _, err := stream.CloseAndRecv(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(held)/float64(b.N), "heap-B/stream")
	}
	b.Run("grpc", func(b *testing.B) {
		p := plugintest.Start(b, bin)
		cc, err := grpc.NewClient(p.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer cc.Close()
		run(b, testpb.NewTestClient(cc))
	})
	b.Run("respawn", func(b *testing.B) {
		rc, err := redial.New(&command.Hook{Path: bin}, redial.WithPolicy(interceptor.New()))
		if err != nil {
			b.Fatal(err)
		}
		defer rc.Close()
		run(b, testpb.NewTestClient(rc))
	})
}

// liveHeap returns the bytes of live heap after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
