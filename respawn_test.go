//go:build unix

package respawn_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/grpc-respawn/respawn"
	"github.com/grpc-respawn/respawn/health"
	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestNew: the one-line Conn retries a call whose plugin was killed under
// it, on a fresh plugin, and Close stops the watcher and the plugin.
func TestNew(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "journal")
	hook := &command.Hook{Path: plugintest.BuildOnce(t), Args: []string{"-journal", journal}}
	conn, err := respawn.New(hook,
		respawn.WithConn(redial.WithName("objectstore")),
		respawn.WithHealth(health.Config{Interval: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := respawntest.Context(t, 20*time.Second)
	if err := conn.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	client := testpb.NewTestClient(conn)
	first := conn.Current()
	errc := make(chan error, 1)
	go func() {
		_, err := client.Get(ctx, &testpb.GetRequest{Id: "g", DelayMs: 1000})
		errc <- err
	}()
	if err := plugintest.WaitJournal(ctx, journal, func(j map[string]int) bool { return j["g"] > 0 }); err != nil {
		t.Fatal(err)
	}
	respawntest.Kill(t, first)
	if err := <-errc; err != nil {
		t.Fatalf("Get killed mid-call: %v, want it retried on a new plugin", err)
	}
	if conn.Current() == first {
		t.Errorf("generation %d: want a new plugin", conn.Current().Number())
	}
	if err := conn.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestNewNilHook(t *testing.T) {
	if _, err := respawn.New(nil); err == nil {
		t.Fatal("New(nil) succeeded")
	}
	var f respawntest.RespawnerFunc
	if _, err := respawn.New(f); err == nil {
		t.Fatal("New(nil RespawnerFunc) succeeded")
	}
}

// TestNewRejectsASecondPolicy: a call policy given through WithConn would
// make two: New fails at once, saying so.
func TestNewRejectsASecondPolicy(t *testing.T) {
	hook := respawntest.RespawnerFunc(func(context.Context, redial.Request) (redial.Backend, error) {
		return redial.Backend{}, errors.New("not called")
	})
	_, err := respawn.New(hook, respawn.WithConn(redial.WithPolicy(interceptor.New())))
	if err == nil || !strings.Contains(err.Error(), "WithPolicy") {
		t.Fatalf("New with a second policy: %v, want an error naming WithPolicy", err)
	}
}

// TestNewWithHealthWatches: WithHealth installs a watcher that finds a
// stopped (SIGSTOPped) plugin hung and replaces it, with no call made.
func TestNewWithHealthWatches(t *testing.T) {
	stoppedIsReplaced(t, respawn.WithHealth(health.Config{Interval: 50 * time.Millisecond, Timeout: 100 * time.Millisecond, Failures: 2}))
}

// TestNewWatchesByDefault: with no option at all, New watches health, and
// a stopped (SIGSTOPped) plugin is found hung and replaced, with no call
// made.
func TestNewWatchesByDefault(t *testing.T) {
	stoppedIsReplaced(t)
}

// stoppedIsReplaced makes a Conn with New and opts, stops (SIGSTOPs) its
// plugin, and fails t unless the plugin is found hung and replaced, with
// no call made.
func stoppedIsReplaced(t *testing.T, opts ...respawn.Option) {
	t.Helper()
	rec := &respawntest.Events{}
	conn, err := respawn.New(&command.Hook{Path: plugintest.BuildOnce(t)},
		append([]respawn.Option{respawn.WithConn(redial.WithEventHandler(rec.Add))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	first := conn.Current()
	if err := syscall.Kill(first.Process().PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	rec.Wait(t, redial.EventHung, first.Number(), 1)
	rec.WaitCurrent(t, conn, first.Number()+1)
}
