//go:build unix

package interceptor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

type traceKey struct{}

// TestNamedPlugin: a host with several plugins can tell from an event, a
// log line and an error which one died; events about a call carry its ctx.
func TestNamedPlugin(t *testing.T) {
	h := newHost(t, nil, []redial.Option{redial.WithName("objectstore")})
	ctx := context.WithValue(respawntest.Context(t, 20*time.Second), traceKey{}, "trace-42")
	err := h.killMidCall(t, "w", func(context.Context) error {
		_, err := h.client.Append(ctx, &testpb.AppendRequest{Id: "w", DelayMs: 5000})
		return err
	})
	var ue *interceptor.OutcomeUnknownError
	if !errors.As(err, &ue) || ue.Plugin != "objectstore" || !strings.Contains(err.Error(), `on plugin "objectstore"`) {
		t.Fatalf("got %v, want an OutcomeUnknownError naming the plugin", err)
	}
	_ = h.rc.Close()
	h.events.Wait(t, redial.EventClosed, 0, 1) // the last event: the others have been seen
	exit, ok := h.events.Find(redial.EventExit, 1)
	if !ok || exit.Plugin != "objectstore" {
		t.Fatalf("exit event %+v, want one naming the plugin", exit)
	}
	unknown, ok := h.events.Find(redial.EventOutcomeUnknown, 0)
	if !ok || unknown.Context == nil || unknown.Context.Value(traceKey{}) != "trace-42" {
		t.Errorf("outcome-unknown event without the call's ctx: %+v", unknown)
	}

	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("plugin exited", "event", exit)
	var line struct {
		Event map[string]any `json:"event"`
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{"event": "exit", "plugin": "objectstore", "signal": 9.0, "signal_name": "killed", "reason": "crashed"} {
		if got := line.Event[key]; got != want {
			t.Errorf("log field %s = %v, want %v (line %s)", key, got, want, buf.String())
		}
	}
	if pid, _ := line.Event["pid"].(float64); pid <= 0 {
		t.Errorf("log field pid = %v, want the plugin's pid", line.Event["pid"])
	}
}
