package health_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/grpc-respawn/respawn/health"
	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// pluginPath is the testplugin binary, built once for tests, examples and
// benchmarks alike (examples have no testing.TB to build it with).
var pluginPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "respawn-health-")
	if err == nil {
		pluginPath, err = plugintest.Build(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "build testplugin:", err)
		os.Exit(2)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { _ = os.RemoveAll(dir) }))
}

// host is a plugin host under test: a redial.Conn with respawn's call
// policy, a stub bound to it, and a Watcher on it.
type host struct {
	rc     *redial.Conn
	client testpb.TestClient
	events *respawntest.Events
	checks *respawntest.Log[health.Check]
}

// newHost starts the first plugin with args, then watches it with cfg; the
// host's journal of checks observes every check.
func newHost(tb testing.TB, args []string, ropts []redial.Option, cfg health.Config) *host {
	tb.Helper()
	return newHostWith(tb, &command.Hook{Path: pluginPath, Args: args}, ropts, cfg)
}

// newHostWith is newHost with a hook of the test's own.
func newHostWith(tb testing.TB, hook redial.Respawner, ropts []redial.Option, cfg health.Config) *host {
	tb.Helper()
	h := &host{checks: &respawntest.Log[health.Check]{}}
	cfg = health.Observed(cfg, h.checks.Add)
	rh := respawntest.NewHost(tb, hook, watchingPolicy(interceptor.New(), cfg), ropts...)
	h.rc, h.client, h.events = rh.Conn, rh.Client, rh.Events
	return h
}

// watching installs watchingPolicy(p, cfg) as the Conn's policy.
func watching(p redial.Policy, cfg health.Config) redial.Option {
	return redial.WithPolicy(watchingPolicy(p, cfg))
}

// watchingPolicy is p (nil: no interceptors) with a health watch with cfg,
// as respawn.New installs.
func watchingPolicy(p redial.Policy, cfg health.Config) redial.Policy {
	return respawntest.StartFunc(func(h redial.Handle) redial.Binding {
		if err := health.Watch(h, cfg); err != nil {
			panic(err) // h is never nil
		}
		if p == nil {
			return redial.Binding{}
		}
		return p.Start(h)
	})
}

// stop closes the Conn, which stops the watch first, after which the
// journals are final: Conn.Close waits for any respawn to end, events
// included.
func (h *host) stop() {
	_ = h.rc.Close()
}

// respawnsAsked counts respawns started after the first launch.
func (h *host) respawnsAsked() int {
	n := 0
	for _, e := range h.events.All() {
		if e.Kind == redial.EventRespawnStart && e.Generation > 1 {
			n++
		}
	}
	return n
}
