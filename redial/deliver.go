package redial

import (
	"bytes"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// eventQueue is how many events wait for a slow handler before the
	// newest are dropped.
	eventQueue = 256
	// drainTimeout bounds how long Close waits for the handler to see the
	// events queued before it.
	drainTimeout = time.Second
)

// delivery hands events to the handler in order, on one goroutine that
// runs only while the queue is not empty, so that a slow or panicking
// handler never blocks or crashes the goroutine that emits. The zero value
// is ready to use; it is safe for concurrent use.
type delivery struct {
	mu      sync.Mutex
	queue   []Event
	running bool
	idle    chan struct{} // closed when the running goroutine empties the queue
	shut    bool          // Close has drained: no more deliveries
	// goroutine is the one that runs the handler, 0 while none runs.
	goroutine atomic.Uint64

	dropped, panics atomic.Uint64
}

// push queues e for f, starting the delivering goroutine if none runs.
func (d *delivery) push(f func(Event), e Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.shut || len(d.queue) >= eventQueue {
		d.dropped.Add(1)
		return
	}
	d.queue = append(d.queue, e)
	if !d.running {
		d.running, d.idle = true, make(chan struct{})
		go d.loop(f)
	}
}

func (d *delivery) loop(f func(Event)) {
	d.goroutine.Store(goid())
	for {
		d.mu.Lock()
		if len(d.queue) == 0 {
			d.goroutine.Store(0)
			d.running, d.queue = false, nil
			close(d.idle)
			d.mu.Unlock()
			return
		}
		e := d.queue[0]
		d.queue[0] = Event{} // drop the references it holds
		d.queue = d.queue[1:]
		d.mu.Unlock()
		d.call(f, e)
	}
}

// call runs the handler; a panic is counted and logged, not propagated.
func (d *delivery) call(f func(Event), e Event) {
	defer func() {
		if r := recover(); r != nil {
			d.panics.Add(1)
			slog.Error("redial: event handler panicked; recovered", "event", e.Kind.String(),
				"generation", e.Generation, "panic", r)
		}
	}()
	f(e)
}

// drain waits up to timeout for the queue to be delivered, then stops
// delivery: later events are dropped.
func (d *delivery) drain(timeout time.Duration) {
	d.mu.Lock()
	idle, running := d.idle, d.running
	d.mu.Unlock()
	if running {
		t := time.NewTimer(timeout)
		select {
		case <-idle:
		case <-t.C:
		}
		t.Stop()
	}
	d.mu.Lock()
	d.shut = true
	d.mu.Unlock()
}

// goid returns the id of the calling goroutine, as its stack trace gives
// it ("goroutine 42 [running]:"): how Close tells a call it waits for from
// one made beside it.
func goid() uint64 {
	var buf [32]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}
