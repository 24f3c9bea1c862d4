package interceptor_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// drainingPlugin is a plugin that drains each connection after 1s (GOAWAY
// "max_age") and closes it 300ms later: a call longer than that is cut on
// every connection, by a plugin that lives.
var drainingPlugin = []string{"-max-conn-age", "1s", "-max-conn-age-grace", "300ms"}

// TestDrainedCallKeepsThePlugin: a call cut by a live plugin draining its
// connection may have run, but the plugin is kept: a read is retried on it
// (and, cut every time, fails with the cut's Unavailable), a write ends as
// outcome unknown; neither respawns.
func TestDrainedCallKeepsThePlugin(t *testing.T) {
	for _, tt := range []struct {
		name  string
		call  func(h *host) error
		id    string
		check func(t *testing.T, err error)
		runs  int
	}{
		{"read", func(h *host) error {
			_, err := h.client.Get(respawntest.Context(t, 30*time.Second), &testpb.GetRequest{Id: "r", DelayMs: 3000})
			return err
		}, "r", func(t *testing.T, err error) {
			// grpc-go's text is pinned here: the classifier's GOAWAY row.
			if s := status.Convert(err); s.Code() != codes.Unavailable || !strings.Contains(s.Message(), "received prior goaway: ") {
				t.Errorf("got %v, want the cut's Unavailable, after a GOAWAY", err)
			}
		}, 4}, // the default Limits.MaxAttempts, all on the same plugin
		{"write", func(h *host) error {
			_, err := h.client.Append(respawntest.Context(t, 30*time.Second), &testpb.AppendRequest{Id: "w", DelayMs: 3000})
			return err
		}, "w", func(t *testing.T, err error) {
			if !errors.Is(err, interceptor.ErrOutcomeUnknown) {
				t.Errorf("got %v, want ErrOutcomeUnknown", err)
			}
		}, 1},
		{"server stream", func(h *host) error {
			s, err := h.client.Watch(respawntest.Context(t, 30*time.Second), &testpb.WatchRequest{Id: "s", DelayMs: 3000, Count: 1})
			if err != nil {
				return err
			}
			if _, err = s.Recv(); err == nil {
				_, err = s.Recv()
			}
			if err == io.EOF {
				err = nil
			}
			return err
		}, "s", func(t *testing.T, err error) {
			if status.Code(err) != codes.Unavailable || errors.Is(err, interceptor.ErrOutcomeUnknown) {
				t.Errorf("got %v, want the cut's Unavailable", err)
			}
		}, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// A wait long enough for a reconnect on a loaded machine.
			h := newHost(t, drainingPlugin, nil, interceptor.WithLimits(interceptor.Limits{EvidenceWait: 2 * time.Second}))
			g := h.rc.Current()
			launched := h.events.Count(redial.EventRespawnStart, 0) // the first launch
			err := tt.call(h)
			t.Logf("grpc-go said: %v", err)
			tt.check(t, err)
			if n := h.executions(t, tt.id); n != tt.runs {
				t.Errorf("the call ran %d times, want %d", n, tt.runs)
			}
			if _, done := g.Process().Exit(); done {
				t.Error("the draining plugin was stopped")
			}
			_ = h.rc.Close()                           // settle: a respawn on its way would show below
			h.events.Wait(t, redial.EventClosed, 0, 1) // the last event: the others have been seen
			starts := h.events.Count(redial.EventRespawnStart, 0) - launched
			if st := h.rc.Stats(); starts != 0 || st.Respawns != 0 || st.CurrentGen != g.Number() {
				t.Errorf("%d respawns asked, %d done, generation %d; want 0, 0, %d: a draining plugin is alive", starts, st.Respawns, st.CurrentGen, g.Number())
			}
		})
	}
}

// TestDrainedClientStreamKeepsThePlugin: an upload cut by a live plugin
// draining its connection, seen by SendMsg (io.EOF, no status), is
// replayed on the same plugin: nothing respawns.
func TestDrainedClientStreamKeepsThePlugin(t *testing.T) {
	h := newHost(t, drainingPlugin, nil, interceptor.WithLimits(interceptor.Limits{EvidenceWait: 2 * time.Second}))
	g := h.rc.Current()
	pid := int64(g.Process().PID)
	launched := h.events.Count(redial.EventRespawnStart, 0)
	ctx := respawntest.Context(t, 30*time.Second)
	stream, err := h.client.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A slow upload, longer than the connection's age and grace: the
	// drain cuts it under a Send. It goes on until the stream has been
	// re-opened (the journal shows a second execution).
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	sent := int64(0)
	for ; h.executions(t, "up") < 2; sent++ {
		if err := stream.Send(&testpb.CollectRequest{Id: "up", Seq: sent}); err != nil {
			t.Fatalf("Send %d: %v", sent, err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("the upload was never cut")
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		t.Fatalf("CloseAndRecv: %v", err)
	}
	if resp.GetPid() != pid || resp.GetCount() != sent {
		t.Errorf("answer: %d of %d messages, by pid %d; want all, by the draining plugin %d", resp.GetCount(), sent, resp.GetPid(), pid)
	}
	if n := h.executions(t, "up"); n < 2 {
		t.Errorf("the upload ran %d times: the drain did not cut it", n)
	}
	_ = h.rc.Close()
	h.events.Wait(t, redial.EventClosed, 0, 1) // the last event: the others have been seen
	starts := h.events.Count(redial.EventRespawnStart, 0) - launched
	if st := h.rc.Stats(); starts != 0 || st.Respawns != 0 || st.CurrentGen != g.Number() {
		t.Errorf("%d respawns asked, %d done, generation %d; want 0, 0, %d: a draining plugin is alive", starts, st.Respawns, st.CurrentGen, g.Number())
	}
}

// TestDrainedBoundCallIsNotGone: a call of a bound method cut by a live
// plugin draining its connection did not find its plugin gone: it fails
// with the cut's Unavailable (a read may be sent again on the same stub,
// to the same plugin), not ErrPluginGone, and nothing respawns.
func TestDrainedBoundCallIsNotGone(t *testing.T) {
	get := testpb.Test_Get_FullMethodName
	h := newHost(t, drainingPlugin, nil, interceptor.WithLimits(interceptor.Limits{EvidenceWait: 2 * time.Second}),
		interceptor.WithBoundMethods(func(m string) bool { return m == get }))
	g := h.rc.Current()
	launched := h.events.Count(redial.EventRespawnStart, 0)
	_, err := h.client.Get(respawntest.Context(t, 30*time.Second), &testpb.GetRequest{Id: "b", DelayMs: 3000})
	if s := status.Convert(err); errors.Is(err, redial.ErrPluginGone) || s.Code() != codes.Unavailable || !strings.Contains(s.Message(), "received prior goaway: ") {
		t.Errorf("got %v, want the cut's Unavailable", err)
	}
	if n := h.executions(t, "b"); n != 1 {
		t.Errorf("the call ran %d times, want 1", n)
	}
	_ = h.rc.Close()
	h.events.Wait(t, redial.EventClosed, 0, 1) // the last event: the others have been seen
	if starts := h.events.Count(redial.EventRespawnStart, 0) - launched; starts != 0 || h.rc.Stats().CurrentGen != g.Number() {
		t.Errorf("%d respawns asked: a draining plugin is alive", starts)
	}
}
