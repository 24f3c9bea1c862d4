package interceptor_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/connectivity"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// host is a plugin host under test: a redial.Conn with respawn's policy, a
// stub bound to it once, and the journal its plugins write.
type host struct {
	rc      *redial.Conn
	handle  redial.Handle // what the policy acts through
	client  testpb.TestClient
	journal string
	events  *respawntest.Events
	cmd     *command.Hook                // the plugin this host runs
	hook    atomic.Pointer[command.Hook] // what the next respawn runs
	// launching, if set, is called with each launch's request before the
	// hook runs it.
	launching atomic.Pointer[func(redial.Request)]
}

// swapHook makes later respawns run c, or the host's own plugin if c is nil.
func (h *host) swapHook(c *command.Hook) {
	if c == nil {
		c = h.cmd
	}
	h.hook.Store(c)
}

func newHost(t *testing.T, args []string, ropts []redial.Option, iopts ...interceptor.Option) *host {
	t.Helper()
	bin := plugintest.BuildOnce(t)
	journal := filepath.Join(t.TempDir(), "journal")
	h := &host{journal: journal}
	h.cmd = &command.Hook{Path: bin, Args: append([]string{"-journal", journal}, args...)}
	h.swapHook(nil)
	hook := respawntest.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
		if f := h.launching.Load(); f != nil {
			(*f)(req)
		}
		return h.hook.Load().Respawn(ctx, req)
	})
	var policy redial.Policy = interceptor.New(iopts...)
	var opts []redial.Option
	for _, o := range ropts {
		if po, ok := o.(policyOption); ok {
			policy = po.p
			continue
		}
		opts = append(opts, o)
	}
	rh := respawntest.NewHost(t, hook, policy, opts...)
	h.rc, h.handle, h.events, h.client = rh.Conn, rh.Handle, rh.Events, rh.Client
	return h
}

// policyOption makes newHost install p instead of its own policy.
type policyOption struct {
	redial.Option
	p redial.Policy
}

// withPolicy is the option of newHost's ropts that replaces its policy.
func withPolicy(p redial.Policy) redial.Option { return policyOption{p: p} }

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
	respawntest.Kill(t, h.rc.Current())
	return <-errc
}

// waitLeftReady waits until g's connection has seen its plugin go.
func waitLeftReady(t *testing.T, g *redial.Generation) {
	t.Helper()
	ctx := respawntest.Context(t, 10*time.Second)
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
	err := plugintest.WaitJournal(respawntest.Context(t, 10*time.Second), h.journal, func(j map[string]int) bool { return j[id] >= want })
	if err != nil {
		t.Fatalf("journal never showed %d executions of %q: %v", want, id, err)
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
