package redial

import (
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
)

// Generation is one plugin instance: its connection, its number and its
// process. It is safe for concurrent use.
type Generation struct {
	n       uint64
	cc      *grpc.ClientConn
	backend Backend
	served  atomic.Bool
	// draining: replaced while alive (Rotate); its calls in flight finish
	// and its connection is closed after its process exits.
	draining atomic.Bool
	calls    atomic.Uint64 // calls sent through the Conn, counted only for Recycle.Calls
	born     time.Time     // when it became a generation
	retired  chan struct{}
	owner    *Conn
	// released: closeDead closed its connection once it had no transport
	// left, which fails the calls queued on it, all never sent.
	released atomic.Bool
}

// Number returns the generation number; the first plugin is 1.
func (g *Generation) Number() uint64 { return g.n }

// ClientConn returns the connection to this plugin.
func (g *Generation) ClientConn() *grpc.ClientConn { return g.cc }

// Process returns the plugin's process, nil if the hook did not report one.
func (g *Generation) Process() *Process { return g.backend.Process }

// Gone reports whether this plugin is known to be dead: its process has
// exited. A call that finds the current generation gone waits for its
// successor instead of being sent to a dead plugin. It costs one atomic
// load, and is always false for a plugin whose hook reported no process.
func (g *Generation) Gone() bool { return g.backend.Process.ended() }

// hasServed reports whether this plugin has served a call ([Handle.Served]).
func (g *Generation) hasServed() bool { return g.served.Load() }

// markServed records that this plugin served a call ([Handle.MarkServed]).
func (g *Generation) markServed() {
	if g.served.Load() {
		return
	}
	g.served.Store(true)
	g.owner.served(g)
}
