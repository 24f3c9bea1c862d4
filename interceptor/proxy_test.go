package interceptor_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// upstream is the gRPC backend a proxying plugin forwards its calls to.
type upstream struct {
	target  string
	journal string             // the backend's own journal, if it runs
	proc    *plugintest.Plugin // the backend, if it runs
	text    string             // the grpc-go text the plugin's client reports
	kill    func(t *testing.T) // kills the backend once the call is in it, if it runs
}

func missingUpstream(t *testing.T) upstream {
	return upstream{target: "unix://" + filepath.Join(t.TempDir(), "none.sock"), text: `connection error: desc = "transport: Error while dialing: dial unix`}
}

func refusingUpstream(t *testing.T) upstream {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close() // nothing listens there now: connection refused
	return upstream{target: addr, text: "connect: connection refused"}
}

func killedUpstream(t *testing.T) upstream {
	journal := filepath.Join(t.TempDir(), "upstream-journal")
	p := plugintest.Start(t, plugintest.BuildOnce(t), "-journal", journal)
	u := upstream{target: p.Addr, journal: journal, proc: p, text: "error reading from server: "}
	u.kill = func(t *testing.T) {
		err := plugintest.WaitJournal(respawntest.Context(t, 10*time.Second), journal, func(j map[string]int) bool { return len(j) > 0 })
		if err != nil {
			t.Fatalf("the call never reached the upstream: %v", err)
		}
		if err := p.Kill(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = p.Wait()
	}
	return u
}

// TestProxiedTransportErrorsAreThePluginsOwn: a plugin whose handler calls
// another gRPC server and returns that client's error unchanged produces
// grpc-go's transport texts from a live process. Such a call ran: it is
// returned as it is, executed once, and the healthy plugin is kept.
func TestProxiedTransportErrorsAreThePluginsOwn(t *testing.T) {
	for _, tc := range []struct {
		name     string
		upstream func(t *testing.T) upstream
	}{
		{"upstream socket missing", missingUpstream},
		{"upstream refuses", refusingUpstream},
		{"upstream killed mid-call", killedUpstream},
	} {
		for _, method := range []string{"Get", "Append"} {
			t.Run(tc.name+"/"+method, func(t *testing.T) {
				u := tc.upstream(t)
				h := newHost(t, []string{"-upstream", u.target}, nil)
				gen := h.rc.Current().Number()
				errc := make(chan error, 1)
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					var err error
					if method == "Get" {
						_, err = h.client.Get(ctx, &testpb.GetRequest{Id: "call", DelayMs: 5000})
					} else {
						_, err = h.client.Append(ctx, &testpb.AppendRequest{Id: "call", DelayMs: 5000})
					}
					errc <- err
				}()
				if u.kill != nil {
					u.kill(t)
				}
				err := <-errc
				if s := status.Convert(err); s.Code() != codes.Unavailable || !strings.Contains(s.Message(), u.text) {
					t.Fatalf("got %v, want the handler's own Unavailable with %q", err, u.text)
				}
				if n := h.executions(t, "call"); n != 1 {
					t.Errorf("the call ran %d times, want 1", n)
				}
				_ = h.rc.Close()                           // settle: a respawn on its way would show below
				h.events.Wait(t, redial.EventClosed, 0, 1) // the last event: the others have been seen
				if got := h.rc.Stats(); got.Respawns != 0 || got.Retries != 0 || got.CurrentGen != gen {
					t.Errorf("stats %+v, want 0 respawns, 0 retries, generation %d", got, gen)
				}
			})
		}
	}
}

// TestUpstreamOutage: 16 callers of a proxying plugin whose backend is
// down respawn nothing and trip no breaker; every write runs once.
func TestUpstreamOutage(t *testing.T) {
	h := newHost(t, []string{"-upstream", refusingUpstream(t).target}, nil)
	const callers, calls = 16, 10
	var wg sync.WaitGroup
	errs := make(chan error, callers*calls)
	for c := range callers {
		wg.Go(func() {
			for i := range calls {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				id := fmt.Sprintf("c%d-%d", c, i)
				var err error
				if c%4 == 0 {
					_, err = h.client.Append(ctx, &testpb.AppendRequest{Id: id})
				} else {
					_, err = h.client.Get(ctx, &testpb.GetRequest{Id: id})
				}
				cancel()
				if s := status.Convert(err); s.Code() != codes.Unavailable || !strings.Contains(s.Message(), "connection refused") {
					errs <- fmt.Errorf("%s: got %v, want the upstream's refusal", id, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	j, err := h.journalCounts(t)
	if err != nil {
		t.Fatal(err)
	}
	for id, n := range j {
		if n != 1 {
			t.Errorf("%s ran %d times, want 1", id, n)
		}
	}
	if len(j) != callers*calls {
		t.Errorf("%d calls reached the plugin, want %d", len(j), callers*calls)
	}
	_ = h.rc.Close()
	h.events.Wait(t, redial.EventClosed, 0, 1) // the last event: the others have been seen
	if st := h.rc.Stats(); st.Respawns != 0 || st.BreakerOpens != 0 || st.Retries != 0 {
		t.Errorf("stats %+v, want no respawn, no breaker, no retry", st)
	}
	h.events.Wait(t, redial.EventRespawnStart, 0, 1) // delivered asynchronously
	if n := h.events.Count(redial.EventRespawnStart, 0); n != 1 {
		t.Errorf("%d launches, want the first only", n)
	}
}
