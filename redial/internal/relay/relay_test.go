package relay_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/grpc-respawn/respawn/redial/internal/relay"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// consumer records what a Relay delivers; a value equal to block waits
// until release is closed, after closing blocked ("": none blocks).
type consumer struct {
	mu      sync.Mutex
	got     []string
	block   string
	blocked chan struct{}
	release chan struct{}
}

func newConsumer(block string) *consumer {
	return &consumer{block: block, blocked: make(chan struct{}), release: make(chan struct{})}
}

func (c *consumer) deliver(v string) {
	if c.block != "" && v == c.block {
		close(c.blocked)
		<-c.release
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, v)
}

func (c *consumer) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

func TestDeliversInOrder(t *testing.T) {
	c := newConsumer("")
	r := relay.New(relay.Config[string]{Deliver: c.deliver, Limit: 100})
	var want []string
	for i := range 50 {
		v := strings.Repeat("x", i)
		want = append(want, v)
		r.Push(v)
	}
	r.Close(10 * time.Second)
	if got := c.all(); !slices.Equal(got, want) {
		t.Errorf("delivered %q, want %q", got, want)
	}
	if n := r.Dropped(); n != 0 {
		t.Errorf("Dropped() = %d, want 0", n)
	}
}

// TestBoundDropsNewest: behind a consumer that blocks, Push returns at
// once; Limit values wait, the newest beyond are dropped and counted.
func TestBoundDropsNewest(t *testing.T) {
	c := newConsumer("first")
	r := relay.New(relay.Config[string]{Deliver: c.deliver, Limit: 3})
	r.Push("first")
	<-c.blocked // being delivered: no longer waiting
	for _, v := range []string{"a", "b", "c", "d", "e"} {
		r.Push(v)
	}
	if n := r.Dropped(); n != 2 {
		t.Errorf("Dropped() = %d with a blocked consumer, want 2", n)
	}
	close(c.release)
	r.Close(10 * time.Second)
	if got, want := c.all(), []string{"first", "a", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("delivered %q, want %q", got, want)
	}
}

// TestCloseBounded: Close waits no longer than its timeout for a consumer
// that blocks; what waits then is dropped, and nothing is delivered after.
func TestCloseBounded(t *testing.T) {
	c := newConsumer("first")
	r := relay.New(relay.Config[string]{Deliver: c.deliver, Limit: 10})
	r.Push("first")
	<-c.blocked
	r.Push("waiting")
	start := time.Now()
	r.Close(50 * time.Millisecond)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v with a 50ms timeout", d)
	}
	r.Push("after")
	if n := r.Dropped(); n != 2 {
		t.Errorf("Dropped() = %d, want 2 (waiting at Close, pushed after)", n)
	}
	close(c.release)
	r.Close(10 * time.Second) // again: waits for nothing
	waitGone(t)
	if got, want := c.all(), []string{"first"}; !slices.Equal(got, want) {
		t.Errorf("delivered %q, want %q", got, want)
	}
}

// waitGone waits until the relay's goroutine has ended (goleak.Find
// retries for a while).
func waitGone(t *testing.T) {
	t.Helper()
	if err := goleak.Find(); err != nil {
		t.Fatalf("the relay's goroutine runs on: %v", err)
	}
}

func TestPanicRecovered(t *testing.T) {
	var got []string
	var panicked []string
	r := relay.New(relay.Config[string]{
		Deliver: func(v string) {
			if v == "bad" {
				panic("consumer bug")
			}
			got = append(got, v)
		},
		Limit:    10,
		Panicked: func(v string, p any) bool { panicked = append(panicked, v+": "+p.(string)); return false },
	})
	for _, v := range []string{"a", "bad", "b"} {
		r.Push(v)
	}
	r.Close(10 * time.Second)
	if want := []string{"a", "b"}; !slices.Equal(got, want) {
		t.Errorf("delivered %q, want %q", got, want)
	}
	if want := []string{"bad: consumer bug"}; !slices.Equal(panicked, want) || r.Panics() != 1 {
		t.Errorf("Panicked saw %q, Panics() = %d; want %q, 1", panicked, r.Panics(), want)
	}
}

// TestPanicStops: a Panicked that says stop ends delivery for good.
func TestPanicStops(t *testing.T) {
	var got []string
	r := relay.New(relay.Config[string]{
		Deliver: func(v string) {
			if v == "bad" {
				panic("consumer bug")
			}
			got = append(got, v)
		},
		Limit:    10,
		Panicked: func(string, any) bool { return true },
	})
	for _, v := range []string{"a", "bad", "b"} {
		r.Push(v)
	}
	waitGone(t)
	r.Push("c")
	r.Close(10 * time.Second)
	if want := []string{"a"}; !slices.Equal(got, want) {
		t.Errorf("delivered %q, want %q", got, want)
	}
	if n := r.Dropped(); n != 2 {
		t.Errorf("Dropped() = %d, want 2 (b, c)", n)
	}
}

// TestDroppedWhereDropped: with sizes, Dropped is told how much was
// dropped, between the values pushed before the drop and those after.
func TestDroppedWhereDropped(t *testing.T) {
	c := newConsumer("first")
	r := relay.New(relay.Config[string]{
		Deliver: c.deliver,
		Limit:   10,
		Size:    func(v string) int { return len(v) },
		Dropped: func(n int) { c.deliver("dropped " + strings.Repeat("#", n)) },
	})
	r.Push("first")
	<-c.blocked
	r.Push("bbbbbbbb") // 8 of 10
	r.Push("ccc")      // does not fit
	r.Push("dd")       // 10 of 10
	r.Push("e")        // does not fit
	close(c.release)
	r.Close(10 * time.Second)
	r2 := relay.New(relay.Config[string]{Deliver: c.deliver, Limit: 10, Size: func(v string) int { return len(v) },
		Dropped: func(n int) { c.deliver("dropped " + strings.Repeat("#", n)) }})
	r2.Push("too long for the limit") // none waits: reported at once
	r2.Close(10 * time.Second)
	want := []string{"first", "bbbbbbbb", "dropped ###", "dd", "dropped #", "dropped " + strings.Repeat("#", 22)}
	if got := c.all(); !slices.Equal(got, want) {
		t.Errorf("delivered %q, want %q", got, want)
	}
	if r.Dropped() != 4 || r2.Dropped() != 22 {
		t.Errorf("Dropped() = %d, %d; want 4, 22", r.Dropped(), r2.Dropped())
	}
}

// TestEnd: End returns at once, and what was pushed before it is
// delivered, then its value, even when the relay is full; nothing pushed
// after it is.
func TestEnd(t *testing.T) {
	c := newConsumer("a")
	r := relay.New(relay.Config[string]{Deliver: c.deliver, Limit: 2})
	r.Push("a")
	waitClosed(t, c.blocked)
	r.Push("b")
	r.Push("c")
	r.Push("dropped: full")
	r.End("last")
	r.Push("dropped: after End")
	r.End("dropped: a second End")
	close(c.release)
	r.Close(10 * time.Second)
	if got, want := c.all(), []string{"a", "b", "c", "last"}; !slices.Equal(got, want) {
		t.Errorf("delivered %q, want %q", got, want)
	}
	if n := r.Dropped(); n != 2 {
		t.Errorf("Dropped() = %d, want 2", n)
	}
}

// TestEndFromDeliver: End called by the consumer does not wait for the
// delivery it runs in, and what was queued behind it is still delivered.
func TestEndFromDeliver(t *testing.T) {
	var r *relay.Relay[string]
	c := newConsumer("")
	ended := make(chan struct{})
	r = relay.New(relay.Config[string]{Deliver: func(v string) {
		if v == "a" {
			r.End("last")
			close(ended)
		}
		c.deliver(v)
	}, Limit: 10})
	r.Push("a")
	r.Push("b")
	waitClosed(t, ended)
	r.Close(10 * time.Second)
	if got, want := c.all(), []string{"a", "b", "last"}; !slices.Equal(got, want) {
		t.Errorf("delivered %q, want %q", got, want)
	}
}

// TestNil: a nil Relay has delivered, dropped and recovered nothing.
func TestNil(t *testing.T) {
	var r *relay.Relay[int]
	r.Close(time.Second)
	r.End(1)
	if r.Dropped() != 0 || r.Panics() != 0 {
		t.Error("a nil Relay reports activity")
	}
}

// waitClosed waits up to 10s for ch to be closed.
func waitClosed(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("not closed within 10s")
	}
}
