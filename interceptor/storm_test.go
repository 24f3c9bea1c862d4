package interceptor_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// TestStorm: 64 callers in flight when the plugin dies cause exactly one
// respawn, and every one of them gets its answer from the new plugin.
func TestStorm(t *testing.T) {
	h := newHost(t, nil, nil)
	const callers = 64
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = h.client.Get(respawntest.Context(t, 30*time.Second), &testpb.GetRequest{Id: fmt.Sprint("storm-", i), DelayMs: 5000})
		}()
	}
	for i := range callers {
		h.waitJournal(t, fmt.Sprint("storm-", i), 1)
	}
	respawntest.Kill(t, h.rc.Current())
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if got := h.rc.Stats().Respawns; got != 1 {
		t.Errorf("respawns = %d, want 1", got)
	}
	h.events.Wait(t, redial.EventRespawnStart, 0, 2)                  // delivered asynchronously
	if got := h.events.Count(redial.EventRespawnStart, 0); got != 2 { // the first launch and one respawn
		t.Errorf("launches = %d, want 2", got)
	}
}

// TestDeadlineShorterThanRespawn: a caller whose deadline ends while the
// new plugin is still starting gets DeadlineExceeded, and the respawn goes on
// for the next caller.
func TestDeadlineShorterThanRespawn(t *testing.T) {
	h := newHost(t, []string{"-start-delay", "1s"}, nil)
	dead := h.rc.Current()
	respawntest.Kill(t, dead)
	waitLeftReady(t, dead)
	ctx := respawntest.Context(t, 200*time.Millisecond)
	_, err := h.client.Get(ctx, &testpb.GetRequest{})
	if got := status.Code(err); got != codes.DeadlineExceeded {
		t.Fatalf("Get with a short deadline: got %v, want DeadlineExceeded", err)
	}
	if n := h.rc.Stats().Respawns; n != 0 {
		t.Fatalf("respawn finished before the short deadline (%d); the plugin's start delay is too short for this test", n)
	}
	if _, err := h.client.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{}); err != nil {
		t.Fatalf("next Get: %v", err)
	}
	if got := h.rc.Stats().Respawns; got != 1 {
		t.Errorf("respawns = %d, want 1", got)
	}
	h.events.Wait(t, redial.EventRespawnStart, 0, 2) // delivered asynchronously
	if got := h.events.Count(redial.EventRespawnStart, 0); got != 2 {
		t.Errorf("launches = %d, want 2: the second caller must join the running respawn", got)
	}
}

// TestCrashLoop: a plugin that dies at every start after the first costs a
// bounded number of launches, then calls fail fast with the typed error.
func TestCrashLoop(t *testing.T) {
	h := newHost(t, nil, []redial.Option{redial.WithPacing(redial.Pacing{CrashLoopLaunches: 3, CrashLoopWindow: time.Minute, CrashLoopCoolDown: time.Hour})})
	if _, err := h.client.Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{}); err != nil {
		t.Fatal(err)
	}
	// From now on every launch fails: the plugin exits at start.
	bad := &command.Hook{Path: plugintest.BuildOnce(t), Args: []string{"-exit-at-start"}}
	h.swapHook(bad)
	dead := h.rc.Current()
	respawntest.Kill(t, dead)
	waitLeftReady(t, dead)
	var err error
	for range 10 {
		if _, err = h.client.Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{}); errors.Is(err, redial.ErrCrashLoop) {
			break
		}
	}
	if !errors.Is(err, redial.ErrCrashLoop) {
		t.Fatalf("got %v, want ErrCrashLoop", err)
	}
	if got := status.Code(err); got != codes.Unavailable {
		t.Errorf("code = %v, want Unavailable", got)
	}
	h.events.Wait(t, redial.EventRespawnStart, 0, 1+3) // delivered asynchronously
	if got := h.events.Count(redial.EventRespawnStart, 0); got != 1+3 {
		t.Errorf("launches = %d, want 1 + 3", got)
	}
	if _, err = h.client.Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{}); !errors.Is(err, redial.ErrCrashLoop) {
		t.Errorf("call while the breaker is open: got %v, want ErrCrashLoop", err)
	}
	h.events.Wait(t, redial.EventRespawnStart, 0, 1+3) // delivered asynchronously
	if got := h.events.Count(redial.EventRespawnStart, 0); got != 1+3 {
		t.Errorf("launches = %d after the breaker opened, want no more", got)
	}
	h.swapHook(nil)
	h.rc.Reset()
	if _, err := h.client.Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{}); err != nil {
		t.Fatalf("Get after Reset with a working plugin: %v", err)
	}
}
