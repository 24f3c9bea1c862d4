package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// TestPoisonRequest: a request that kills every plugin that runs it costs
// at most two plugins per call, fails with its own error, and does not
// open the breaker that protects the other callers.
func TestPoisonRequest(t *testing.T) {
	h := newHost(t, []string{"-die-on", "poison"}, nil)
	const calls = 4 // 8 deaths: more than the breaker's 5 launches
	for i := range calls {
		id := fmt.Sprintf("poison-%d", i)
		exits := h.events.Count(redial.EventExit, 0)
		_, err := h.client.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{Id: id, Key: "poison"})
		var pe *interceptor.PoisonRequestError
		if !errors.Is(err, interceptor.ErrPoisonRequest) || !errors.As(err, &pe) {
			t.Fatalf("%s: got %v, want ErrPoisonRequest", id, err)
		}
		if status.Code(err) != codes.Unknown || pe.Deaths != 2 {
			t.Errorf("%s: code %v, %d deaths; want Unknown, 2", id, status.Code(err), pe.Deaths)
		}
		if n := h.executions(t, id); n != 2 {
			t.Errorf("%s ran %d times, want 2", id, n)
		}
		h.events.Wait(t, redial.EventExit, 0, exits+2)
		// The others are served all along.
		if _, err := h.client.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{Key: "fine"}); err != nil {
			t.Fatalf("a good call after %s: %v", id, err)
		}
	}
	_ = h.rc.Close()
	st := h.rc.Stats()
	if st.BreakerOpens != 0 {
		t.Errorf("the breaker opened %d times, want 0", st.BreakerOpens)
	}
	if st.Crashes != 2*calls {
		t.Errorf("%d plugins died, want %d", st.Crashes, 2*calls)
	}
}

// TestKilledFromOutsideIsNoPoison: two plugins SIGKILLed from outside with
// one idempotent call in each (an operator, a chaos run) did not die of the
// call: it is not a poison request, and it succeeds on the third plugin.
func TestKilledFromOutsideIsNoPoison(t *testing.T) {
	if testing.Short() {
		t.Skip("20 plugins killed")
	}
	if runtime.GOOS != "linux" {
		t.Skip("only Linux tells an OOM kill from another SIGKILL")
	}
	h := newHost(t, nil, nil)
	for i := range 10 {
		id := fmt.Sprintf("killed-%d", i)
		errc := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := h.client.Get(ctx, &testpb.GetRequest{Id: id, DelayMs: 1500})
			errc <- err
		}()
		for n := 1; n <= 2; n++ {
			h.waitJournal(t, id, n) // the attempt is in the plugin's handler
			respawntest.Kill(t, h.rc.Current())
		}
		if err := <-errc; err != nil {
			t.Errorf("%s, with 2 plugins SIGKILLed under it: %v, want success", id, err)
		} else if n := h.executions(t, id); n != 3 {
			t.Errorf("%s ran %d times, want 3", id, n)
		}
	}
	for _, e := range h.events.All() {
		if e.Kind == redial.EventExit && e.Exit.SelfInflicted {
			t.Errorf("%v: an external SIGKILL taken for the plugin's own doing", e.Exit)
		}
	}
}
