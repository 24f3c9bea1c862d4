package interceptor_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/pickfirst"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/serviceconfig"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// A plugin SIGKILLed under a call, on a host that sees its death late: its
// exit is reported, and its connection leaves READY, only once the call's
// answer is decided (as on a loaded host, where the goroutines that bring
// both run hundreds of milliseconds late). The kernel knows at once: the
// call of any kind is judged as on a host that keeps up.
func TestKillSeenLate(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(ctx context.Context, c testpb.TestClient, id string) (pid int64, err error)
		// unknown: not idempotent, so an outcome unknown, not retried.
		unknown bool
	}{
		{name: "unary read", call: func(ctx context.Context, c testpb.TestClient, id string) (int64, error) {
			m, err := c.Get(ctx, &testpb.GetRequest{Id: id, DelayMs: 3000})
			return m.GetPid(), err
		}},
		{name: "unary write", unknown: true, call: func(ctx context.Context, c testpb.TestClient, id string) (int64, error) {
			m, err := c.Append(ctx, &testpb.AppendRequest{Id: id, DelayMs: 3000})
			return m.GetPid(), err
		}},
		{name: "server stream", call: func(ctx context.Context, c testpb.TestClient, id string) (int64, error) {
			s, err := c.Watch(ctx, &testpb.WatchRequest{Id: id, DelayMs: 3000, Count: 1})
			if err != nil {
				return 0, err
			}
			m, err := s.Recv()
			if err != nil {
				return 0, err
			}
			if _, err := s.Recv(); err != io.EOF {
				return 0, err
			}
			return m.GetPid(), nil
		}},
		{name: "client stream", call: func(ctx context.Context, c testpb.TestClient, id string) (int64, error) {
			s, err := c.Collect(ctx)
			if err != nil {
				return 0, err
			}
			if err := s.Send(&testpb.CollectRequest{Id: id, DelayMs: 3000}); err != nil {
				return 0, err
			}
			m, err := s.CloseAndRecv()
			return m.GetPid(), err
		}},
		{name: "bidi stream", call: func(ctx context.Context, c testpb.TestClient, id string) (int64, error) {
			s, err := c.Echo(ctx)
			if err != nil {
				return 0, err
			}
			if err := s.Send(&testpb.EchoRequest{Id: id, DelayMs: 3000}); err != nil {
				return 0, err
			}
			m, err := s.Recv()
			if err != nil {
				return 0, err
			}
			if err := s.CloseSend(); err != nil {
				return 0, err
			}
			if _, err := s.Recv(); err != io.EOF {
				return 0, err
			}
			return m.GetPid(), nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, late := newLateHost(t)
			pid := h.rc.Current().Process().PID
			type result struct {
				pid int64
				err error
			}
			done := make(chan result, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				pid, err := tc.call(ctx, h.client, "late-1")
				done <- result{pid, err}
			}()
			h.waitJournal(t, "late-1", 1)
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			res := <-done
			late.release()
			switch {
			case tc.unknown:
				if !errors.Is(res.err, interceptor.ErrOutcomeUnknown) {
					t.Fatalf("got %v, want ErrOutcomeUnknown: a write that may have run must not leave as a bare Unavailable, which retry layers retry", res.err)
				}
				if n := h.executions(t, "late-1"); n != 1 {
					t.Errorf("late-1 ran %d times, want 1", n)
				}
			case res.err != nil:
				t.Fatalf("got %v, want the call retried on the successor", res.err)
			case res.pid == int64(pid):
				t.Errorf("answered by pid %d, the killed plugin", pid)
			}
		})
	}
}

// lateDeaths holds back what a host learns of its plugins' deaths, as a
// loaded host's late goroutines do: the exit of each plugin's process is
// reported, and a ClientConn that was READY leaves READY, only once
// release is called.
type lateDeaths struct {
	released chan struct{}
	closed   atomic.Bool
}

func (l *lateDeaths) release() {
	if l.closed.CompareAndSwap(false, true) {
		close(l.released)
	}
}

// holding is the lateDeaths the hold-ready balancer obeys, nil when none.
var holding atomic.Pointer[lateDeaths]

// holdReady is pick_first whose ClientConn stays READY once it was, while
// a lateDeaths holds.
const holdReady = "respawn_test_hold_ready"

func init() { balancer.Register(holdReadyBuilder{}) }

type holdReadyBuilder struct{}

func (holdReadyBuilder) Name() string { return holdReady }

func (holdReadyBuilder) Build(cc balancer.ClientConn, opts balancer.BuildOptions) balancer.Balancer {
	return balancer.Get(pickfirst.Name).Build(&holdReadyCC{ClientConn: cc}, opts)
}

func (holdReadyBuilder) ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	return balancer.Get(pickfirst.Name).(balancer.ConfigParser).ParseConfig(js)
}

type holdReadyCC struct {
	balancer.ClientConn
	ready atomic.Bool // READY was passed on
}

func (c *holdReadyCC) UpdateState(s balancer.State) {
	if l := holding.Load(); l != nil && !l.closed.Load() && c.ready.Load() && s.ConnectivityState != connectivity.Ready {
		return
	}
	c.ready.Store(s.ConnectivityState == connectivity.Ready)
	c.ClientConn.UpdateState(s)
}

// newLateHost is newHost whose plugins' deaths the host sees late.
func newLateHost(t *testing.T) (*host, *lateDeaths) {
	t.Helper()
	late := &lateDeaths{released: make(chan struct{})}
	if !holding.CompareAndSwap(nil, late) {
		t.Fatal("another test holds the connections' states")
	}
	bin := plugintest.BuildOnce(t)
	journal := filepath.Join(t.TempDir(), "journal")
	h := &host{journal: journal, events: &respawntest.Events{}}
	h.cmd = &command.Hook{Path: bin, Args: []string{"-journal", journal}}
	hook := respawntest.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
		b, err := h.cmd.Respawn(ctx, req)
		if err != nil || b.Process == nil {
			return b, err
		}
		real := b.Process
		kill := func() error { return syscall.Kill(real.PID, syscall.SIGKILL) }
		seen, report := redial.NewProcess(real.PID, kill)
		b.Process = seen
		go func() {
			<-real.Done()
			<-late.released
			e, _ := real.Exit()
			report(e)
		}()
		return b, nil
	})
	rc, err := redial.New(hook,
		redial.WithPolicy(interceptor.New()),
		redial.WithEventHandler(h.events.Add),
		redial.WithDialOptions(grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"`+holdReady+`":{}}]}`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.Close() })
	t.Cleanup(func() { late.release(); holding.CompareAndSwap(late, nil) }) // first: Close waits for the exits
	if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	h.rc, h.client = rc, testpb.NewTestClient(rc)
	return h, late
}
