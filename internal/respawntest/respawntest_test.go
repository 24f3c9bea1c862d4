package respawntest_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestEvents(t *testing.T) {
	var ev respawntest.Events
	ev.Add(redial.Event{Kind: redial.EventExit, Generation: 1})
	ev.Add(redial.Event{Kind: redial.EventRespawnDone, Generation: 2, Attempt: 1})
	ev.Add(redial.Event{Kind: redial.EventRespawnDone, Generation: 2, Attempt: 2})
	ev.Add(redial.Event{Kind: redial.EventRespawnDone, Generation: 3})

	for _, tt := range []struct {
		name string
		kind redial.EventKind
		gen  uint64
		want int
	}{
		{"any generation", redial.EventRespawnDone, 0, 3},
		{"one generation", redial.EventRespawnDone, 2, 2},
		{"none of that generation", redial.EventExit, 2, 0},
		{"none of that kind", redial.EventHung, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := ev.Count(tt.kind, tt.gen); got != tt.want {
				t.Errorf("Count(%v, %d) = %d, want %d", tt.kind, tt.gen, got, tt.want)
			}
		})
	}
	if e, ok := ev.Find(redial.EventRespawnDone, 2); !ok || e.Attempt != 1 {
		t.Errorf("Find(respawn-done, 2) = %+v, %v; want the first, Attempt 1", e, ok)
	}
	if _, ok := ev.Find(redial.EventHung, 0); ok {
		t.Error("Find(hung, 0) found an event, want none")
	}
	if got := len(ev.All()); got != 4 {
		t.Errorf("len(All()) = %d, want 4", got)
	}
	if e := ev.Wait(t, redial.EventRespawnDone, 2, 2); e.Attempt != 2 {
		t.Errorf("Wait(respawn-done, 2, 2) = %+v, want the second, Attempt 2", e)
	}
}

// Wait wakes for an event added after it started waiting.
func TestEventsWaitWakes(t *testing.T) {
	var ev respawntest.Events
	ev.Add(redial.Event{Kind: redial.EventExit, Generation: 1})
	go func() {
		ev.Add(redial.Event{Kind: redial.EventRetry, Generation: 1}) // not waited for
		ev.Add(redial.Event{Kind: redial.EventExit, Generation: 2})
	}()
	if e := ev.Wait(t, redial.EventExit, 0, 2); e.Generation != 2 {
		t.Errorf("Wait(exit, 0, 2) = %+v, want generation 2", e)
	}
}

// TestLogWaitFromAhead: a Wait from an index the log has not reached yet
// waits for a value at that index or later, and skips those before it.
func TestLogWaitFromAhead(t *testing.T) {
	var l respawntest.Log[int]
	l.Add(0)
	go func() {
		for i := 1; i <= 3; i++ {
			l.Add(i)
		}
	}()
	if v, i := l.Wait(t, 3, "value 3", func(int) bool { return true }); v != 3 || i != 3 {
		t.Errorf("Wait(from 3) = %d at %d, want 3 at 3", v, i)
	}
}
