package redial

import "google.golang.org/grpc"

// A Handle is what a [Policy] acts on its Conn through: where a call made on
// a connection belongs, what happened to it, and which plugin served it.
// Hosts hold the Conn; a Policy gets the Handle from [WithPolicy], as
// grpc-go gives a balancer a balancer.ClientConn rather than the
// *grpc.ClientConn, so that the Conn's methods are those a host uses and
// retries, outcome-unknown failures and served calls are reported by the
// policy that saw them.
//
// A Handle is safe for concurrent use. Its zero value is not usable.
type Handle struct{ c *Conn }

// Conn returns the Conn the handle acts on.
func (h *Handle) Conn() *Conn { return h.c }

// Route says where a call made on cc belongs: the current generation if cc
// is the current connection or one this Conn has retired, and nil if cc is
// not one of ours (for instance a go-plugin client still setting itself up),
// in which case the call must go where it was sent.
func (h *Handle) Route(cc *grpc.ClientConn) *Generation { return h.c.route(cc) }

// Emit counts e and queues it for the handler set with [WithEventHandler];
// it never waits for the handler (see there for the delivery guarantee).
// A policy reports its retries and failures through it, so that one handler
// sees the whole story. Time and Plugin are filled in if zero.
func (h *Handle) Emit(e Event) { h.c.emit(e) }

// Closed reports whether [Conn.Close] has been called.
func (h *Handle) Closed() bool { return h.c.closed.Load() }

// Released reports whether redial closed g's connection, after g's process
// exited, once the connection had no transport left: a call on g that
// failed with that closing (grpc-go's "the client connection is closing")
// was waiting for a transport and never reached the plugin. A connection
// closed otherwise (retired under calls in flight, or by the hook) is not
// released: the calls it cut may have run.
func (h *Handle) Released(g *Generation) bool { return g.released.Load() }

// MarkServed records that g served a call. A plugin that never does counts
// towards the crash-loop breaker. Only the first call on g is not free: it
// takes a lock.
func (h *Handle) MarkServed(g *Generation) { g.markServed() }
