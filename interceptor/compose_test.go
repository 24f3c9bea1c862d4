//go:build unix

package interceptor_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/timeout"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// callTimeout is the chains' timeout interceptor's; the test contexts'
// deadlines are later, so that it is the one in force.
const callTimeout = 15 * time.Second

// isPut is the method a host wants no retries from respawn for.
func isPut(m string) bool { return m == testpb.Test_Put_FullMethodName }

// notPut leaves Put out of respawn's interceptor with selector, as the
// reversed chain does.
var notPut = selector.MatchFunc(func(_ context.Context, m interceptors.CallMeta) bool {
	return m.FullMethod() != testpb.Test_Put_FullMethodName
})

// chain builds a host's Conn options: a go-grpc-middleware chain with
// respawn's interceptor in it, and the probes.
type chain func(p *probes) []redial.Option

// recommended is the chain docs/composing.md shows, outermost first: logging (one
// line per call, with the caller's outcome), timeout (one deadline for the
// whole call, respawn's waits included), retry with respawn's predicate
// (for a live plugin's own Unavailable), all given to WithDialOptions; then
// the policy, which leaves Put to the host's retries (WithPassthrough).
func recommended(retriable bool) chain {
	return func(p *probes) []redial.Option {
		ropts := []retry.CallOption{retry.WithMax(3)}
		if retriable {
			ropts = append(ropts, retry.WithRetriable(interceptor.Retriable))
		}
		policy := interceptor.New(interceptor.WithPassthrough(isPut))
		return []redial.Option{
			redial.WithDialOptions(grpc.WithChainUnaryInterceptor(
				logging.UnaryClientInterceptor(p.logger()),
				timeout.UnaryClientInterceptor(callTimeout),
				retry.UnaryClientInterceptor(ropts...),
			)),
			withPolicy(respawntest.PolicyFunc(func(h redial.Handle) []grpc.DialOption {
				return []grpc.DialOption{
					grpc.WithChainUnaryInterceptor(
						p.enter,
						policy.UnaryClientInterceptor(h),
						p.attempt,
					),
					grpc.WithDisableRetry(),
				}
			})),
		}
	}
}

// reversed is the same chain upside down, respawn outermost: every layer
// then runs once per respawn attempt, and a selector, not WithPassthrough,
// keeps Put from respawn's interceptor, which then routes it nowhere.
func reversed(p *probes) []redial.Option {
	policy := interceptor.New()
	return []redial.Option{withPolicy(respawntest.PolicyFunc(func(h redial.Handle) []grpc.DialOption {
		return []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(
				p.enter,
				selector.UnaryClientInterceptor(policy.UnaryClientInterceptor(h), notPut),
				retry.UnaryClientInterceptor(retry.WithMax(3)),
				timeout.UnaryClientInterceptor(callTimeout),
				logging.UnaryClientInterceptor(p.logger()),
				p.attempt,
			),
			grpc.WithDisableRetry(),
		}
	}))}
}

func newComposedHost(t *testing.T, c chain, ropts ...redial.Option) (*host, *probes) {
	t.Helper()
	p := newProbes()
	h := newHost(t, nil, append(c(p), ropts...))
	return h, p
}

// deadlines counts the distinct deadlines among attempts.
func deadlines(as []attemptSeen) int {
	var ds []time.Time
	for _, a := range as {
		if !slices.ContainsFunc(ds, a.deadline.Equal) {
			ds = append(ds, a.deadline)
		}
	}
	return len(ds)
}

// TestComposeKilledRead: a read killed mid-call succeeds in either order.
// In the recommended one, mw's logging writes one line, with the caller's
// OK, and every attempt runs under the one deadline of the timeout
// interceptor. Upside down, logging writes a line per respawn attempt,
// failures the caller never saw included, and each attempt gets a fresh
// timeout, so the call as a whole is not bounded by it.
func TestComposeKilledRead(t *testing.T) {
	get := testpb.Test_Get_FullMethodName
	t.Run("recommended", func(t *testing.T) {
		h, p := newComposedHost(t, recommended(true))
		err := h.killMidCall(t, "r", func(ctx context.Context) error {
			_, err := h.client.Get(ctx, &testpb.GetRequest{Id: "r", DelayMs: 1000})
			return err
		})
		if err != nil {
			t.Fatalf("Get killed mid-call: %v", err)
		}
		if got := p.logged(get); !slices.Equal(got, []codes.Code{codes.OK}) {
			t.Errorf("logged %v, want one line: OK", got)
		}
		as := p.seen(get)
		t.Logf("logged %v; %d attempts under %d deadlines", p.logged(get), len(as), deadlines(as))
		if len(as) < 2 {
			t.Errorf("%d attempts, want one on the killed plugin and one on its successor", len(as))
		}
		if n := deadlines(as); n != 1 {
			t.Errorf("attempts ran under %d deadlines, want the call's one", n)
		}
		if n := h.executions(t, "r"); n != 2 {
			t.Errorf("the read ran %d times, want 2 (killed, then on the successor)", n)
		}
	})
	t.Run("reversed", func(t *testing.T) {
		h, p := newComposedHost(t, reversed)
		err := h.killMidCall(t, "r", func(ctx context.Context) error {
			_, err := h.client.Get(ctx, &testpb.GetRequest{Id: "r", DelayMs: 1000})
			return err
		})
		if err != nil {
			t.Fatalf("Get killed mid-call: %v", err)
		}
		got := p.logged(get)
		t.Logf("logged %v; %d attempts under %d deadlines", got, len(p.seen(get)), deadlines(p.seen(get)))
		if len(got) < 2 || got[len(got)-1] != codes.OK || !slices.ContainsFunc(got, func(c codes.Code) bool { return c != codes.OK }) {
			t.Errorf("logged %v, want a line per attempt: failures, then OK", got)
		}
		if n := deadlines(p.seen(get)); n < 2 {
			t.Errorf("attempts ran under %d deadlines, want one per respawn attempt", n)
		}
	})
}

// TestComposeKilledWrite: a write killed mid-call runs once and fails as
// outcome unknown in either order (mw's retry retries neither respawn's
// codes.Unknown nor, with Retriable, any verdict of respawn's). Only the
// recommended order logs what the caller got.
func TestComposeKilledWrite(t *testing.T) {
	appendM := testpb.Test_Append_FullMethodName
	for _, tt := range []struct {
		name      string
		chain     chain
		wantLines func([]codes.Code) bool
		want      string
	}{
		{"recommended", recommended(true), func(c []codes.Code) bool { return slices.Equal(c, []codes.Code{codes.Unknown}) }, "one line: Unknown"},
		{"reversed", reversed, func(c []codes.Code) bool { return len(c) > 0 && !slices.Contains(c, codes.Unknown) }, "lines of the attempts' own failures, none with the caller's Unknown"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, p := newComposedHost(t, tt.chain)
			err := h.killMidCall(t, "w", func(ctx context.Context) error {
				_, err := h.client.Append(ctx, &testpb.AppendRequest{Id: "w", DelayMs: 5000})
				return err
			})
			if !errors.Is(err, interceptor.ErrOutcomeUnknown) {
				t.Errorf("got %v, want ErrOutcomeUnknown", err)
			}
			if n := h.executions(t, "w"); n != 1 {
				t.Errorf("the write ran %d times, want 1", n)
			}
			t.Logf("logged %v; %d attempts", p.logged(appendM), len(p.seen(appendM)))
			if got := p.logged(appendM); !tt.wantLines(got) {
				t.Errorf("logged %v, want %s", got, tt.want)
			}
		})
	}
}

// TestComposeExcludedMethodOnRetiredConn: a stub bound to the first
// plugin's connection (as a go-plugin stub dispensed once is) calls Put,
// which the host keeps from respawn's retries. With WithPassthrough the call
// reaches the current plugin; with a selector around respawn's interceptor,
// it is stranded on the closed connection of a dead plugin.
func TestComposeExcludedMethodOnRetiredConn(t *testing.T) {
	for _, tt := range []struct {
		name   string
		chain  chain
		routed bool
	}{
		{"recommended", recommended(true), true},
		{"reversed", reversed, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := newComposedHost(t, tt.chain)
			ctx := respawntest.Context(t, 20*time.Second)
			g1 := h.rc.Current()
			stale := testpb.NewTestClient(g1.ClientConn())
			if _, err := stale.Put(ctx, &testpb.PutRequest{Id: "p0", Key: "k", Value: "v"}); err != nil {
				t.Fatalf("Put on the live first plugin: %v", err)
			}
			respawntest.Kill(t, g1)
			if _, err := h.client.Get(ctx, &testpb.GetRequest{}); err != nil {
				t.Fatalf("Get after the kill: %v", err)
			}
			waitShutdown(t, g1.ClientConn())
			_, err := stale.Put(ctx, &testpb.PutRequest{Id: "p1", Key: "k", Value: "v"})
			t.Logf("Put on the retired connection: %v", err)
			if tt.routed {
				if err != nil {
					t.Errorf("Put on the retired connection: %v, want it routed to the current plugin", err)
				}
				if n := h.executions(t, "p1"); n != 1 {
					t.Errorf("the Put ran %d times, want 1", n)
				}
				return
			}
			if status.Code(err) != codes.Canceled {
				t.Errorf("Put on the retired connection: %v, want Canceled (the connection is closing)", err)
			}
			if n := h.executions(t, "p1"); n != 0 {
				t.Errorf("the Put ran %d times, want 0", n)
			}
		})
	}
}

// waitShutdown waits until redial has closed cc.
func waitShutdown(t *testing.T, cc *grpc.ClientConn) {
	t.Helper()
	ctx := respawntest.Context(t, 10*time.Second)
	for s := cc.GetState(); s != connectivity.Shutdown; s = cc.GetState() {
		if !cc.WaitForStateChange(ctx, s) {
			t.Fatal("the retired plugin's connection was never closed")
		}
	}
}

// TestComposeCrashLoop: once the crash-loop breaker is open, a call through
// mw's retry given respawn's predicate reaches respawn once and fails fast
// with the CrashLoopError; without the predicate, the retry layer spends
// all its attempts on it (CrashLoopError is Unavailable).
func TestComposeCrashLoop(t *testing.T) {
	get := testpb.Test_Get_FullMethodName
	for _, tt := range []struct {
		name    string
		chain   chain
		entries int
	}{
		{"recommended", recommended(true), 1},
		{"without Retriable", recommended(false), 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, p := newComposedHost(t, tt.chain, redial.WithPacing(redial.Pacing{CrashLoopLaunches: 3, CrashLoopWindow: time.Minute, CrashLoopCoolDown: time.Hour}))
			h.swapHook(&command.Hook{Path: plugintest.BuildOnce(t), Args: []string{"-exit-at-start"}})
			dead := h.rc.Current()
			respawntest.Kill(t, dead)
			waitLeftReady(t, dead)
			var err error
			for range 10 {
				if _, err = h.client.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{}); errors.Is(err, redial.ErrCrashLoop) {
					break
				}
			}
			if !errors.Is(err, redial.ErrCrashLoop) {
				t.Fatalf("got %v, want ErrCrashLoop", err)
			}
			p.reset()
			if _, err = h.client.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{}); !errors.Is(err, redial.ErrCrashLoop) {
				t.Fatalf("call while the breaker is open: got %v, want ErrCrashLoop", err)
			}
			t.Logf("reached respawn %d times; logged %v", p.entries(get), p.logged(get))
			if got := p.entries(get); got != tt.entries {
				t.Errorf("the call reached respawn %d times, want %d", got, tt.entries)
			}
			if got := p.logged(get); !slices.Equal(got, []codes.Code{codes.Unavailable}) {
				t.Errorf("logged %v, want one line: Unavailable", got)
			}
		})
	}
}
