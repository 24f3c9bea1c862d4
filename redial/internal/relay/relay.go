// Package relay is the bounded asynchronous queue between a goroutine that
// must never wait and a consumer that may be slow, block or panic: redial's
// event handler, a plugin's stderr writer. Values are handed to the
// consumer in order on a goroutine of the relay's own, started when a value
// waits and gone when none does, so an idle relay costs no goroutine.
package relay

import (
	"sync"
	"sync/atomic"
	"time"
)

// Config says what a [Relay] hands its values to, and how many may wait.
type Config[T any] struct {
	// Deliver is called with each value, in the order pushed, one at a
	// time.
	Deliver func(T)
	// Limit bounds the units waiting (a value being delivered no longer
	// waits); a value that does not fit is dropped. It must be positive.
	Limit int
	// Size returns how many units v takes, as len for bytes; nil counts
	// one per value.
	Size func(v T) int
	// Dropped, if not nil, is told how many units were dropped, where they
	// were dropped: after the values pushed before them are delivered,
	// before those pushed after.
	Dropped func(units int)
	// Panicked, if not nil, is told what Deliver panicked with on v (or
	// Dropped, with the zero v); the panic is recovered either way. It
	// returns whether to stop: deliver nothing more, as after Close.
	Panicked func(v T, recovered any) (stop bool)
}

// Relay queues values for [Config.Deliver]. Its methods are safe for
// concurrent use, and those other than Push are safe on a nil *Relay,
// which has delivered nothing.
type Relay[T any] struct {
	c Config[T]

	mu      sync.Mutex
	queue   []entry[T]
	lead    int // units dropped while none waited, reported before the next value
	used    int // units waiting
	running bool
	idle    chan struct{} // closed when the running goroutine has nothing left
	closed  bool          // Close has run, or Panicked said stop: nothing more is delivered
	ended   bool          // End has run: nothing more is queued

	dropped, panics atomic.Uint64
}

type entry[T any] struct {
	v     T
	units int // v's size
	after int // units dropped after v, reported once v is delivered
}

// New returns a Relay that hands what is pushed to c.Deliver.
func New[T any](c Config[T]) *Relay[T] { return &Relay[T]{c: c} }

// Push queues v, or drops it if it does not fit or the relay is closed or
// ended. It never waits for the consumer.
func (r *Relay[T]) Push(v T) {
	n := 1
	if r.c.Size != nil {
		n = r.c.Size(v)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed || r.ended:
		r.dropped.Add(uint64(n))
		return
	case r.used+n > r.c.Limit:
		r.dropped.Add(uint64(n))
		if r.c.Dropped == nil {
			return
		}
		if len(r.queue) > 0 {
			r.queue[len(r.queue)-1].after += n
		} else {
			r.lead += n
		}
	default:
		r.queue = append(r.queue, entry[T]{v: v, units: n})
		r.used += n
	}
	r.startLocked()
}

// startLocked starts the delivering goroutine unless it runs. r.mu is held.
func (r *Relay[T]) startLocked() {
	if !r.running {
		r.running, r.idle = true, make(chan struct{})
		go r.loop()
	}
}

func (r *Relay[T]) loop() {
	var zero T
	for {
		r.mu.Lock()
		if r.closed || len(r.queue) == 0 && r.lead == 0 {
			r.dropped.Add(uint64(r.used))
			r.queue, r.used, r.lead = nil, 0, 0
			r.running = false
			close(r.idle)
			r.mu.Unlock()
			return
		}
		if n := r.lead; n > 0 {
			r.lead = 0
			r.mu.Unlock()
			r.call(zero, func() { r.c.Dropped(n) })
			continue
		}
		e := r.queue[0]
		r.queue[0] = entry[T]{} // drop the references it holds
		r.queue = r.queue[1:]
		r.used -= e.units
		r.mu.Unlock()
		r.call(e.v, func() { r.c.Deliver(e.v) })
		if e.after > 0 && !r.isClosed() {
			r.call(zero, func() { r.c.Dropped(e.after) })
		}
	}
}

// call runs f, which hands v (or a drop count) to the consumer, and
// recovers its panic.
func (r *Relay[T]) call(v T, f func()) {
	defer func() {
		if p := recover(); p != nil {
			r.panics.Add(1)
			if r.c.Panicked != nil && r.c.Panicked(v, p) {
				r.mu.Lock()
				r.closed = true
				r.mu.Unlock()
			}
		}
	}()
	f()
}

func (r *Relay[T]) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// Close waits up to timeout until what was pushed before it has been
// delivered, then closes the relay: what still waits is dropped, and so is
// what is pushed later; a delivery in progress at the deadline is the
// last. Called from Deliver, it waits out timeout, for the delivery it
// runs in cannot end before it returns. Close may be called more than
// once.
func (r *Relay[T]) Close(timeout time.Duration) {
	if r == nil {
		return
	}
	r.mu.Lock()
	idle, running := r.idle, r.running
	r.mu.Unlock()
	if running {
		t := time.NewTimer(timeout)
		select {
		case <-idle:
		case <-t.C:
		}
		t.Stop()
	}
	r.mu.Lock()
	r.closed = true
	r.dropped.Add(uint64(r.used))
	r.queue, r.used, r.lead = nil, 0, 0
	r.mu.Unlock()
}

// End queues last and returns without waiting for the consumer: what was
// pushed before is delivered, in order, then last, which takes no room (it
// is queued however many units wait), and nothing after it, since what is
// pushed later is dropped. After End or Close, End does nothing. So it may
// be called from Deliver.
func (r *Relay[T]) End(last T) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.ended {
		return
	}
	r.ended = true
	r.queue = append(r.queue, entry[T]{v: last})
	r.startLocked()
}

// Dropped returns how many units the relay has dropped: pushed while too
// many waited or after Close, or still waiting at Close.
func (r *Relay[T]) Dropped() uint64 {
	if r == nil {
		return 0
	}
	return r.dropped.Load()
}

// Panics returns how many panics of the consumer the relay has recovered.
func (r *Relay[T]) Panics() uint64 {
	if r == nil {
		return 0
	}
	return r.panics.Load()
}
