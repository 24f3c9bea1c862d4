package redial

import (
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
)

// Generation is one plugin instance: its connection, its number and its
// process, and the verbs that act on that one plugin, as grpc-go's
// balancer.SubConn carries those of one connection. Condemn, KillHung and
// MarkServed are for the Conn's call policy and health watch; a host
// replaces a plugin with [Conn.Rotate]. It is safe for concurrent use.
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
	// recovering: the respawn that made it current counts as in progress
	// until it serves a call (see untilServed).
	recovering atomic.Bool
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

// Served reports whether this plugin has served a call (health checks do
// not count).
func (g *Generation) Served() bool { return g.served.Load() }

// MarkServed records that this plugin served a call: a call policy calls it
// for each call the plugin answered. A plugin that never does counts
// towards the crash-loop breaker. Only the first call is not free: it
// takes a lock.
func (g *Generation) MarkServed() {
	if g.served.Load() {
		return
	}
	g.served.Store(true)
	g.owner.served(g)
}

// Retired returns a channel that is closed when a newer generation replaces
// this one or its Conn is closed.
func (g *Generation) Retired() <-chan struct{} { return g.retired }

// Released reports whether redial closed this plugin's connection, after
// its process exited, once the connection had no transport left: a call
// that failed with that closing (grpc-go's "the client connection is
// closing") was waiting for a transport and never reached the plugin. A
// connection closed otherwise (retired under calls in flight, or by the
// hook) is not released: the calls it cut may have run.
func (g *Generation) Released() bool { return g.released.Load() }

// Condemn starts replacing this plugin, if it is still current, and returns
// at once: it is [Handle.Replace] without the wait. cause is the failure
// that condemned it. On a nil Generation it does nothing.
func (g *Generation) Condemn(cause error) {
	if g != nil {
		g.owner.condemn(g, cause)
	}
}

// KillHung replaces this plugin, which stopped answering, and kills it: it
// reports [EventHung] with cause, condemns it, and then kills its process
// (its exit is reported with Reason [ExitHungKilled]), so that calls
// waiting on it fail at once. If it is not current (retired already), or
// is nil, it does nothing.
func (g *Generation) KillHung(cause error) {
	if g != nil {
		g.owner.killHung(g, cause)
	}
}

// Ledger returns this plugin's ledger file, for a call policy that retries
// calls through the plugins' ledgers (package ledger); the zero Ledger if
// its Conn keeps no ledgers or the launch was given no file.
func (g *Generation) Ledger() Ledger { return Ledger{g.backend.ledger, g.backend.Process} }

// Ledger is one plugin's ledger file in its Conn's ledger directory
// ([Generation.Ledger]). The zero Ledger, that of a plugin given no file,
// keeps nothing: Kept returns "" and Hold and Release do nothing. It is
// safe for concurrent use.
type Ledger struct {
	f *ledgerFile
	p *Process
}

// Kept returns the name of the file in the Conn's ledger directory if the
// plugin keeps its ledger there: the file the Conn made for its launch is
// still at its name, its first record is the one the plugin's process
// wrote with its launch's key, and, on Linux, that process was seen
// holding it open; "" otherwise. One lstat(2), and a read of the first
// record and of /proc/<pid>/fd until they have shown it.
func (l Ledger) Kept() string { return l.f.kept(l.p) }

// Hold counts a call in flight on the plugin that may be retried through
// its ledger, and Release ends the count once the call has ended. A
// plugin's ledger file is removed once its process is stopped and no call
// holds it, and at Close in any case. Both are cheap: an atomic add.
func (l Ledger) Hold() { l.f.hold() }

// Release ends a count that Hold began.
func (l Ledger) Release() { l.f.release() }
