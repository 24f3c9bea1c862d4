package interceptor_test

import (
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

func TestStreamKilledBeforeFirstMessage(t *testing.T) {
	h := newHost(t, nil, nil)
	oldPID := int64(h.rc.Current().Process().PID)
	ctx := respawntest.Context(t, 20*time.Second)
	stream, err := h.client.Watch(ctx, &testpb.WatchRequest{Id: "watch-1", DelayMs: 3000, Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	h.waitJournal(t, "watch-1", 1)
	// The retry replaces the stream under these: -race checks they read it
	// safely.
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				_ = stream.Context().Err()
			}
		}
	}()
	respawntest.Kill(t, h.rc.Current())
	_, _ = stream.Header() // the killed attempt's: it ended without headers
	for seq := range int64(3) {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv %d: %v", seq, err)
		}
		if m.GetSeq() != seq || m.GetPid() == oldPID {
			t.Errorf("message %d: seq %d from pid %d, want seq %d from a new plugin", seq, m.GetSeq(), m.GetPid(), seq)
		}
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("Recv after the last message: got %v, want io.EOF", err)
	}
	_ = stream.Trailer()
	if got := h.executions(t, "watch-1"); got != 2 {
		t.Errorf("watch-1 ran %d times, want 2 (once per plugin)", got)
	}
}

func TestStreamKilledAfterFirstMessage(t *testing.T) {
	h := newHost(t, nil, nil)
	ctx := respawntest.Context(t, 20*time.Second)
	stream, err := h.client.Watch(ctx, &testpb.WatchRequest{Count: 3, IntervalMs: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	respawntest.Kill(t, h.rc.Current())
	if _, err := stream.Recv(); !errors.Is(err, interceptor.ErrStreamBroken) || status.Code(err) != codes.Aborted {
		t.Fatalf("Recv after the plugin died mid-stream: got %v, want ErrStreamBroken, Aborted (never replay what the caller saw)", err)
	}
	if _, err := h.client.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{}); err != nil {
		t.Fatalf("next call: %v", err)
	}
	if got := h.rc.Stats().Respawns; got != 1 {
		t.Errorf("respawns = %d, want 1", got)
	}
}
