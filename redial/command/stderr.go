package command

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

// stderrBacklog bounds what a plugin's stderr may have waiting for a slow
// [Hook.Stderr] writer; beyond it, output is dropped and the drop said.
const stderrBacklog = 1 << 20

// asyncWriter hands what is written to it to w on a goroutine of its own,
// which runs only while something waits to be written, so that the
// goroutine that reads a plugin's pipes and reaps it never waits for the
// host's writer: a writer that blocks or is slow cannot delay the sight of
// the plugin's exit. It keeps at most stderrBacklog bytes waiting; what
// comes beyond is dropped, and w is told how much in a line of its own. A
// writer that panics is logged once and written to no more; after close,
// w is written to no more either. It is safe for concurrent use.
type asyncWriter struct {
	w io.Writer

	mu      sync.Mutex
	buf     []byte
	dropped int
	running bool
	idle    chan struct{} // closed when the running goroutine has written everything
	broken  bool          // w panicked, or a is closed: w is called no more
}

// Write queues p for w. It never blocks on w and never fails.
func (a *asyncWriter) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.broken {
		return len(p), nil
	}
	keep := min(len(p), max(stderrBacklog-len(a.buf), 0))
	a.buf = append(a.buf, p[:keep]...)
	a.dropped += len(p) - keep
	if !a.running && (len(a.buf) > 0 || a.dropped > 0) {
		a.running, a.idle = true, make(chan struct{})
		go a.loop()
	}
	return len(p), nil
}

func (a *asyncWriter) loop() {
	for {
		a.mu.Lock()
		b, dropped := a.buf, a.dropped
		a.buf, a.dropped = nil, 0
		if len(b) == 0 && dropped == 0 || a.broken {
			a.running = false
			close(a.idle)
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		a.write(b)
		if dropped > 0 && !a.isBroken() {
			a.write(fmt.Appendf(nil, "[respawn: %d bytes of the plugin's stderr dropped: the Stderr writer was too slow]\n", dropped))
		}
	}
}

// write writes b to w, and stops the writer for good if w panics.
func (a *asyncWriter) write(b []byte) {
	defer func() {
		if r := recover(); r != nil {
			a.mu.Lock()
			a.broken = true
			a.mu.Unlock()
			slog.Error("command: the Hook's Stderr writer panicked; the plugin's stderr is no longer written to it", "panic", r)
		}
	}()
	_, _ = a.w.Write(b)
}

func (a *asyncWriter) isBroken() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.broken
}

// close waits up to d until everything written so far has been handed to
// w, then makes sure w is called no more: what is still waiting, or is
// written later (by a child that outlived the plugin), is dropped. A call
// of w in progress at the deadline is the last one. A nil asyncWriter has
// nothing to close.
func (a *asyncWriter) close(d time.Duration) {
	if a == nil {
		return
	}
	a.mu.Lock()
	running, idle := a.running, a.idle
	a.mu.Unlock()
	if running {
		t := time.NewTimer(d)
		select {
		case <-idle:
		case <-t.C:
		}
		t.Stop()
	}
	a.mu.Lock()
	a.broken = true
	a.mu.Unlock()
}

// teeStderr returns where a plugin's stderr goes: to tail, and to w too if
// it is not nil, through host, an [asyncWriter] (nil if w is).
func teeStderr(tail *proc.Tail, w io.Writer) (all io.Writer, host *asyncWriter) {
	if w == nil {
		return tail, nil
	}
	host = &asyncWriter{w: w}
	return io.MultiWriter(tail, host), host
}
