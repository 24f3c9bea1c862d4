package interceptor_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/connectivity"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// host is a plugin host under test: a redial.Conn with respawn's policy, a
// stub bound to it once, and the journal its plugins write.
type host struct {
	rc      *redial.Conn
	client  testpb.TestClient
	journal string
	events  *recorder
	cmd     *redial.Command                // the plugin this host runs
	hook    atomic.Pointer[redial.Command] // what the next respawn runs
}

// swapHook makes later respawns run c, or the host's own plugin if c is nil.
func (h *host) swapHook(c *redial.Command) {
	if c == nil {
		c = h.cmd
	}
	h.hook.Store(c)
}

func newHost(t *testing.T, args []string, ropts []redial.Option, iopts ...interceptor.Option) *host {
	t.Helper()
	bin := plugintest.BuildOnce(t)
	journal := filepath.Join(t.TempDir(), "journal")
	h := &host{journal: journal, events: &recorder{}}
	h.cmd = &redial.Command{Path: bin, Args: append([]string{"-journal", journal}, args...)}
	h.swapHook(nil)
	hook := redial.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
		return h.hook.Load().Respawn(ctx, req)
	})
	opts := append([]redial.Option{
		redial.WithPolicy(interceptor.New(iopts...)),
		redial.WithEventHandler(h.events.add),
	}, ropts...)
	rc, err := redial.New(hook, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.Close() })
	ctx := testCtx(t, 20*time.Second)
	if err := rc.Connect(ctx); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	h.rc, h.client = rc, testpb.NewTestClient(rc)
	return h
}

// testCtx returns a context that ends with the test or after d.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// kill SIGKILLs the current plugin and waits until it is reaped and the
// connection has noticed.
func (h *host) kill(t *testing.T) *redial.Generation {
	t.Helper()
	g := h.rc.Current()
	p := g.Process()
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 10*time.Second)
	select {
	case <-p.Done():
	case <-ctx.Done():
		t.Fatal("plugin not reaped after SIGKILL")
	}
	return g
}

// killMidCall runs call in another goroutine, SIGKILLs the plugin once the
// journal shows id in its handler, and returns call's error.
func (h *host) killMidCall(t *testing.T, id string, call func(ctx context.Context) error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		errc <- call(ctx)
	}()
	h.waitJournal(t, id, 1)
	h.kill(t)
	return <-errc
}

// waitLeftReady waits until g's connection has seen its plugin go.
func waitLeftReady(t *testing.T, g *redial.Generation) {
	t.Helper()
	ctx := testCtx(t, 10*time.Second)
	cc := g.ClientConn()
	for s := cc.GetState(); s == connectivity.Ready; s = cc.GetState() {
		if !cc.WaitForStateChange(ctx, s) {
			t.Fatal("connection stayed READY after its plugin died")
		}
	}
}

// waitJournal waits until the journal holds want executions of id: the
// call is in its handler.
func (h *host) waitJournal(t *testing.T, id string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		if h.executions(t, id) >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("journal never showed %d executions of %q", want, id)
		}
	}
}

func (h *host) journalCounts(t *testing.T) (map[string]int, error) {
	t.Helper()
	return plugintest.ReadJournal(h.journal)
}

func (h *host) executions(t *testing.T, id string) int {
	t.Helper()
	j, err := plugintest.ReadJournal(h.journal)
	if err != nil {
		t.Fatal(err)
	}
	return j[id]
}

// recorder keeps the events a Conn reports.
type recorder struct {
	mu     sync.Mutex
	events []redial.Event
}

func (r *recorder) add(e redial.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) count(k redial.EventKind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Kind == k {
			n++
		}
	}
	return n
}
