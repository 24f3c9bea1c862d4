package goplugin_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/goplugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/goplugin"
)

// TestPermanentErrors: a go-plugin launch that can never succeed is not
// retried as a crash: one launch, then a typed error at once, saying what
// the plugin printed or how it ended.
func TestPermanentErrors(t *testing.T) {
	bin := goplugintest.BuildOnce(t)
	tests := []struct {
		name   string
		config func() *plugin.ClientConfig
		want   []string
	}{
		{"wrong magic cookie", func() *plugin.ClientConfig {
			cfg := goplugintest.Config(bin, "")
			cfg.MagicCookieValue = "not-the-plugin's"
			return cfg
		}, []string{"exited with code 1", "This binary is a plugin"}},
		{"API version mismatch", func() *plugin.ClientConfig {
			cfg := goplugintest.Config(bin, "")
			cfg.ProtocolVersion++
			return cfg
		}, []string{"API version"}},
		{"not a plugin", func() *plugin.ClientConfig {
			cfg := goplugintest.Config(bin, "")
			cfg.Cmd = exec.Command("/bin/echo", "hello")
			return cfg
		}, []string{`printed "hello"`, "not a plugin"}},
		{"binary missing", func() *plugin.ClientConfig {
			cfg := goplugintest.Config(bin, "")
			cfg.Cmd = exec.Command("/nonexistent/plugin")
			return cfg
		}, []string{"no such file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			hook := &goplugin.Hook{Client: func() *plugin.ClientConfig { calls.Add(1); return tt.config() }}
			rc, err := redial.New(hook)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			for range 3 {
				err := rc.Connect(respawntest.Context(t, 30*time.Second))
				if !errors.Is(err, redial.ErrPermanent) {
					t.Fatalf("got %v, want ErrPermanent", err)
				}
				if got := status.Code(err); got != codes.FailedPrecondition {
					t.Errorf("code = %v, want FailedPrecondition", got)
				}
				for _, w := range tt.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
			}
			if got := calls.Load(); got != 1 {
				t.Errorf("launches = %d, want 1", got)
			}
		})
	}
}

// TestSilentExitIsAFailedLaunch: a binary that exits before it prints a
// handshake or anything else (/bin/false) is an ordinary failed launch,
// tried again, not a permanent failure: a plugin that cannot start yet
// does the same.
func TestSilentExitIsAFailedLaunch(t *testing.T) {
	hook := &goplugin.Hook{Client: func() *plugin.ClientConfig {
		cfg := goplugintest.Config(goplugintest.BuildOnce(t), "")
		cfg.Cmd = exec.Command("/bin/false")
		return cfg
	}}
	events := &respawntest.Events{}
	rc, err := redial.New(hook, redial.WithEventHandler(events.Add))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ctx, cancel := context.WithCancel(respawntest.Context(t, 30*time.Second))
	done := make(chan error, 1)
	go func() { done <- rc.Connect(ctx) }()
	events.Wait(t, redial.EventExit, 0, 2) // launched again
	cancel()
	err = <-done
	if errors.Is(err, redial.ErrPermanent) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Connect: %v, want its ctx's Canceled and no permanent failure", err)
	}
	respawntest.WantContains(t, err, "exited with code 1")
}

// TestCrashAtStartIsACrash: a plugin that exits by itself before its
// handshake crashed, whoever noticed first (go-plugin reading its closed
// stdout, or the reaper): its exit is a "crashed" exit that
// Stats.Crashes counts, never a launch redial abandoned.
func TestCrashAtStartIsACrash(t *testing.T) {
	const runs = 20
	bin := goplugintest.BuildOnce(t)
	hook := &goplugin.Hook{Client: func() *plugin.ClientConfig {
		cfg := goplugintest.Config(bin, "")
		cfg.Cmd.Env = append(cfg.Cmd.Env, goplugintest.ExitAtStartEnv+"=3")
		return cfg
	}}
	events := &respawntest.Events{}
	rc, err := redial.New(hook, redial.WithEventHandler(events.Add), redial.WithPacing(redial.Pacing{
		CrashLoopLaunches: 10 * runs, LaunchRate: 1000, LaunchBurst: 1000, // no breaker, no rate bound
		BackOff: func() backoff.BackOff { return &backoff.ZeroBackOff{} },
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ctx, cancel := context.WithCancel(respawntest.Context(t, 60*time.Second))
	done := make(chan error, 1)
	go func() { done <- rc.Connect(ctx) }() // launches until cancelled
	events.Wait(t, redial.EventExit, 0, runs)
	cancel()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "exited with code 3") {
		t.Fatalf("Connect: got %v, want the exit with code 3", err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	events.Wait(t, redial.EventClosed, 0, 1) // the last event: the others have been seen
	exits := events.CountFor(func(e redial.Event) bool { return e.Kind == redial.EventExit })
	for _, e := range events.All() {
		if e.Kind == redial.EventExit && (e.Exit.Code != 3 || e.Exit.Reason != "crashed") {
			t.Errorf("exit %v (reason %v), want code 3, crashed", e.Exit, e.Exit.Reason)
		}
	}
	if got := rc.Stats().Crashes; got != uint64(exits) {
		t.Errorf("Stats().Crashes = %d, want %d, one per exit", got, exits)
	}
}
