package goplugin_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
	"go.uber.org/goleak"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/goplugintest"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/goplugin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// setup says how to build a host.
type setup struct {
	mtls  bool
	opts  []goplugin.Option
	ropts []redial.Option
	// wrap, if set, wraps the hook given to redial, to observe it.
	wrap func(redial.Respawner) redial.Respawner
}

// host is a go-plugin host under test: a redial.Conn launching the
// gopluginplugin binary through a goplugin.Hook, and a stub dispensed once
// from the first client.
type host struct {
	hook    *goplugin.Hook
	rc      *redial.Conn
	client  testpb.TestClient
	journal string
	events  *recorder
}

func newHost(t *testing.T, s setup) *host {
	t.Helper()
	bin := goplugintest.BuildOnce(t)
	journal := filepath.Join(t.TempDir(), "journal")
	hook := goplugin.New(func() *plugin.ClientConfig {
		cfg := goplugintest.Config(bin, journal)
		cfg.AutoMTLS = s.mtls
		return cfg
	}, s.opts...)
	var r redial.Respawner = hook
	if s.wrap != nil {
		r = s.wrap(hook)
	}
	rec := newRecorder()
	opts := append([]redial.Option{
		redial.WithPolicy(interceptor.New()),
		redial.WithEventHandler(rec.add),
	}, s.ropts...)
	rc, err := redial.New(r, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.Close() })
	raw, err := hook.Dispense(testCtx(t, 30*time.Second), rc, goplugintest.Name)
	if err != nil {
		t.Fatalf("Dispense: %v", err)
	}
	return &host{hook: hook, rc: rc, client: raw.(testpb.TestClient), journal: journal, events: rec}
}

// testCtx returns a context that ends with the test or after d.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// kill SIGKILLs the current plugin and waits until it is reaped.
func (h *host) kill(t *testing.T) *redial.Generation {
	t.Helper()
	g := h.rc.Current()
	p := g.Process()
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-testCtx(t, 10*time.Second).Done():
		t.Fatal("plugin not reaped after SIGKILL")
	}
	return g
}

// waitGeneration waits until plugin n or a later one is current.
func (h *host) waitGeneration(t *testing.T, n uint64) *redial.Generation {
	t.Helper()
	ctx := testCtx(t, 20*time.Second)
	for {
		if g := h.rc.Current(); g != nil && g.Number() >= n {
			return g
		}
		select {
		case <-h.events.respawned:
		case <-ctx.Done():
			t.Fatalf("plugin %d never became current", n)
		}
	}
}

func (h *host) journalCounts(t *testing.T) map[string]int {
	t.Helper()
	j, err := plugintest.ReadJournal(h.journal)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// recorder keeps the events a Conn reports and signals respawns.
type recorder struct {
	respawned chan struct{} // gets a value (if there is room) per successful respawn

	mu     sync.Mutex
	events []redial.Event
}

func newRecorder() *recorder { return &recorder{respawned: make(chan struct{}, 1)} }

func (r *recorder) add(e redial.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	if e.Kind == redial.EventRespawnDone && e.Err == nil {
		select {
		case r.respawned <- struct{}{}:
		default: // a waiter re-reads Current anyway
		}
	}
}

func (r *recorder) find(k redial.EventKind, gen uint64) (redial.Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.Kind == k && e.Generation == gen {
			return e, true
		}
	}
	return redial.Event{}, false
}

// launchMedian is the median duration of successful respawns.
func (r *recorder) launchMedian() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ds []time.Duration
	for _, e := range r.events {
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
