package health_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/grpc-respawn/respawn/health"
	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
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
	w      *health.Watcher
	events *journal[redial.Event]
	checks *journal[health.Check]
}

// newHost starts the first plugin with args, then watches it with opts.
func newHost(tb testing.TB, args []string, ropts []redial.Option, opts ...health.Option) *host {
	tb.Helper()
	return newHostWith(tb, &redial.Command{Path: pluginPath, Args: args}, ropts, opts...)
}

// newHostWith is newHost with a hook of the test's own.
func newHostWith(tb testing.TB, hook redial.Respawner, ropts []redial.Option, opts ...health.Option) *host {
	tb.Helper()
	h := &host{events: &journal[redial.Event]{}, checks: &journal[health.Check]{}}
	ropts = append([]redial.Option{
		redial.WithPolicy(interceptor.New()),
		redial.WithEventHandler(h.events.add),
	}, ropts...)
	rc, err := redial.New(hook, ropts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = rc.Close() })
	if err := rc.Connect(testCtx(tb, 20*time.Second)); err != nil {
		tb.Fatalf("Connect: %v", err)
	}
	w, err := health.Watch(rc, append(opts, health.WithCheckHandler(h.checks.add))...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(w.Close) // runs before rc.Close: cleanups run last first
	h.rc, h.client, h.w = rc, testpb.NewTestClient(rc), w
	return h
}

// stop closes the Watcher and the Conn, after which the journals are
// final: Conn.Close waits for any respawn to end, events included.
func (h *host) stop() {
	h.w.Close()
	_ = h.rc.Close()
}

// respawnsAsked counts respawns started after the first launch.
func (h *host) respawnsAsked() int {
	return h.events.count(func(e redial.Event) bool {
		return e.Kind == redial.EventRespawnStart && e.Generation > 1
	})
}

// testCtx returns a context that ends with the test or after d.
func testCtx(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// journal records values reported from other goroutines and lets a test
// wait for one.
type journal[T any] struct {
	mu      sync.Mutex
	items   []T
	changed chan struct{} // closed and replaced on each add
}

func (j *journal[T]) add(v T) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.items = append(j.items, v)
	if j.changed != nil {
		close(j.changed)
		j.changed = nil
	}
}

// wait returns the first item from index from on that matches, and its
// index, or fails tb when ctx ends first.
func (j *journal[T]) wait(tb testing.TB, ctx context.Context, from int, what string, match func(T) bool) (T, int) {
	tb.Helper()
	for {
		j.mu.Lock()
		for i := from; i < len(j.items); i++ {
			if match(j.items[i]) {
				v := j.items[i]
				j.mu.Unlock()
				return v, i
			}
		}
		from = len(j.items)
		if j.changed == nil {
			j.changed = make(chan struct{})
		}
		changed := j.changed
		j.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			var zero T
			tb.Fatalf("gave up waiting for %s: %v", what, ctx.Err())
			return zero, -1
		}
	}
}

func (j *journal[T]) count(match func(T) bool) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, v := range j.items {
		if match(v) {
			n++
		}
	}
	return n
}

func (j *journal[T]) len() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.items)
}

func isEvent(k redial.EventKind, gen uint64) func(redial.Event) bool {
	return func(e redial.Event) bool { return e.Kind == k && e.Generation == gen }
}
