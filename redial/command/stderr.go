package command

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/grpc-respawn/respawn/redial/internal/proc"
	"github.com/grpc-respawn/respawn/redial/internal/relay"
)

// stderrBacklog bounds what a plugin's stderr may have waiting for a slow
// [Hook.Stderr] writer; beyond it, output is dropped and the drop said.
const stderrBacklog = 1 << 20

// hostStderr hands what a plugin writes to its stderr to the host's
// [Hook.Stderr] writer through a relay, on a goroutine that runs only while
// something waits to be written, so that the goroutine that reads the
// plugin's pipes and reaps it never waits for the host's writer: a writer
// that blocks or is slow cannot delay the sight of the plugin's exit. At
// most stderrBacklog bytes wait; what comes beyond is dropped, and the
// writer is told how much in a line of its own. A writer that panics is
// logged once and written to no more; after close, it is written to no
// more either. It is safe for concurrent use.
type hostStderr struct{ r *relay.Relay[[]byte] }

func newHostStderr(w io.Writer) *hostStderr {
	return &hostStderr{relay.New(relay.Config[[]byte]{
		Deliver: func(b []byte) { _, _ = w.Write(b) },
		Limit:   stderrBacklog,
		Size:    func(b []byte) int { return len(b) },
		Dropped: func(n int) {
			_, _ = fmt.Fprintf(w, "[redial: %d bytes of the plugin's stderr dropped: the Stderr writer was too slow]\n", n)
		},
		Panicked: func(_ []byte, v any) bool {
			slog.Error("command: the Hook's Stderr writer panicked; the plugin's stderr is no longer written to it", "panic", v)
			return true
		},
	})}
}

// Write queues a copy of p for the host's writer. It never blocks on it and
// never fails.
func (h *hostStderr) Write(p []byte) (int, error) {
	h.r.Push(bytes.Clone(p))
	return len(p), nil
}

// close waits up to d until everything written so far has been handed to
// the host's writer, then makes sure it is called no more: what is still
// waiting, or is written later (by a child that outlived the plugin), is
// dropped. A call of the writer in progress at the deadline is the last
// one. A nil hostStderr has nothing to close.
func (h *hostStderr) close(d time.Duration) {
	if h != nil {
		h.r.Close(d)
	}
}

// teeStderr returns where a plugin's stderr goes: to tail, and to w too if
// it is not nil, through host (nil if w is).
func teeStderr(tail *proc.Tail, w io.Writer) (all io.Writer, host *hostStderr) {
	if w == nil {
		return tail, nil
	}
	host = newHostStderr(w)
	return io.MultiWriter(tail, host), host
}
