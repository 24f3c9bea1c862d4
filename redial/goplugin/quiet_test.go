package goplugin_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/goplugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/goplugin"
)

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestStopLogsNoWarnings: go-plugin's logger, the host's, reads no warning
// when a plugin killed from outside (what the OOM killer does) is cleaned
// up, nor when Rotate and Close stop a live plugin gracefully. Before, every
// cleanup of a dead plugin logged "error closing client during Kill" and
// "plugin failed to exit gracefully": the exited plugin was asked to exit.
func TestStopLogsNoWarnings(t *testing.T) {
	bin := goplugintest.BuildOnce(t)
	logs := &syncBuffer{}
	ctx := respawntest.Context(t, 30*time.Second)
	hook := &goplugin.Hook{Client: func() *plugin.ClientConfig {
		cfg := goplugintest.Config(bin, "")
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "host", Output: logs, Level: hclog.Trace})
		return cfg
	}}
	h := respawntest.NewHost(t, hook, interceptor.New())
	conn, events := h.Conn, h.Events
	raw, err := hook.Dispense(conn.Current(), goplugintest.Name)
	if err != nil {
		t.Fatal(err)
	}
	client := raw.(testpb.TestClient)
	const kills = 3
	for i := range kills {
		g := conn.Current()
		respawntest.Kill(t, g)
		if _, err := client.Get(ctx, &testpb.GetRequest{}); err != nil {
			t.Fatalf("Get after kill %d: %v", i+1, err)
		}
	}
	rotated := conn.Current()
	if err := conn.Rotate(ctx); err != nil {
		t.Fatalf("Rotate: %v", err)
	}
	if err := conn.Close(); err != nil { // waits for the other plugins' cleanup
		t.Fatalf("Close: %v", err)
	}
	events.Wait(t, redial.EventClosed, 0, 1) // the last event: the others have been seen
	for _, n := range []uint64{rotated.Number(), conn.Current().Number()} {
		if e, _ := events.Find(redial.EventExit, n); e.Exit.Code != 0 || e.Exit.Signal != 0 {
			t.Errorf("the exit of plugin %d, live when rotated or closed: %v, want a graceful exit 0", n, e.Exit)
		}
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "[WARN]") {
			t.Errorf("go-plugin logged: %s", line)
		}
	}
}

// TestFailedStartLogsNoWarnings: a plugin that exits at start is cleaned
// up without go-plugin warning that it "failed to exit gracefully": it was
// never asked to. Go-plugin's own report of the exit stays.
func TestFailedStartLogsNoWarnings(t *testing.T) {
	bin := goplugintest.BuildOnce(t)
	logs := &syncBuffer{}
	events := &respawntest.Events{}
	hook := &goplugin.Hook{Client: func() *plugin.ClientConfig {
		cfg := goplugintest.Config(bin, "")
		cfg.Cmd.Env = append(cfg.Cmd.Env, goplugintest.ExitAtStartEnv+"=3")
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "host", Output: logs, Level: hclog.Trace})
		return cfg
	}}
	rc, err := redial.New(hook, redial.WithEventHandler(events.Add))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ctx, cancel := context.WithCancel(respawntest.Context(t, 30*time.Second))
	done := make(chan error, 1)
	go func() { done <- rc.Connect(ctx) }()
	events.Wait(t, redial.EventExit, 0, 2)
	cancel()
	<-done
	if err := rc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	out := logs.String()
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "[WARN]") {
			t.Errorf("go-plugin logged: %s", line)
		}
	}
	if !strings.Contains(out, "plugin process exited") {
		t.Errorf("go-plugin's log has no report of the exit:\n%s", out)
	}
}
