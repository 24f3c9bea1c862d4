package goplugin_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
	"go.uber.org/goleak"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/goplugintest"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/goplugin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// setup says how to build a host.
type setup struct {
	mtls      bool
	init      func(context.Context, plugin.ClientProtocol) error // the Hook's Init
	stopGrace time.Duration                                      // the Hook's StopGrace
	ropts     []redial.Option
	// wrap, if set, wraps the hook given to redial, to observe it.
	wrap func(redial.Respawner) redial.Respawner
	// cmd, if set, makes the command that launches the plugin binary bin
	// (for instance through a shell); it gets the config's environment.
	cmd func(bin string) *exec.Cmd
}

// host is a go-plugin host under test: a redial.Conn launching the
// gopluginplugin binary through a goplugin.Hook, and a stub dispensed once
// from the first client.
type host struct {
	hook    *goplugin.Hook
	rc      *redial.Conn
	client  testpb.TestClient
	journal string
	events  *respawntest.Events
}

func newHost(t *testing.T, s setup) *host {
	t.Helper()
	bin := goplugintest.BuildOnce(t)
	journal := filepath.Join(t.TempDir(), "journal")
	hook := &goplugin.Hook{Client: func() *plugin.ClientConfig {
		cfg := goplugintest.Config(bin, journal)
		cfg.AutoMTLS = s.mtls
		if s.cmd != nil {
			env := cfg.Cmd.Env
			cfg.Cmd = s.cmd(bin)
			cfg.Cmd.Env = append(cfg.Cmd.Env, env...)
		}
		return cfg
	}, Init: s.init, StopGrace: s.stopGrace}
	var r redial.Respawner = hook
	if s.wrap != nil {
		r = s.wrap(hook)
	}
	rh := respawntest.NewHost(t, r, interceptor.New(), s.ropts...)
	rc, events := rh.Conn, rh.Events
	raw, err := hook.Dispense(rc.Current(), goplugintest.Name)
	if err != nil {
		t.Fatalf("Dispense: %v", err)
	}
	return &host{hook: hook, rc: rc, client: raw.(testpb.TestClient), journal: journal, events: events}
}

// waitGeneration waits until plugin n or a later one is current.
func (h *host) waitGeneration(t *testing.T, n uint64) *redial.Generation {
	t.Helper()
	return h.events.WaitCurrent(t, h.rc, n)
}

func (h *host) journalCounts(t *testing.T) map[string]int {
	t.Helper()
	j, err := plugintest.ReadJournal(h.journal)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// launchMedian is the median duration of the successful respawns among
// events.
func launchMedian(events []redial.Event) time.Duration {
	var ds []time.Duration
	for _, e := range events {
		if e.Kind == redial.EventRespawnDone && e.Err == nil {
			ds = append(ds, e.Duration)
		}
	}
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}
