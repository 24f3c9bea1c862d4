package interceptor

// A call that is not idempotent, retried through the plugins' ledgers
// (WithLedger, package ledger): sent again, with the same call id, to the
// successor of a plugin that died with it, whose ledger answers from the
// dead plugin's record rather than run it twice.

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/redial"
)

// ledgered reports whether a unary call of method is kept in the plugins'
// ledgers: one respawn could not otherwise send again, were its plugin to
// die under it.
func (p *Policy) ledgered(method string, req any, opts []grpc.CallOption) bool {
	return !p.passthrough(method) && !p.bound(method) && !p.idempotent(method, req, opts)
}

// deadWithLedger reports whether g's plugin kept a ledger and its process
// is dead, so that its ledger holds all it will ever hold: exited, or, with
// its death under way (a zombie, a SIGKILL pending), unable to run another
// instruction. A lost connection to a process that still runs is no such
// evidence: it might yet record and run the call.
func deadWithLedger(ctx context.Context, h redial.Handle, g *redial.Generation) bool {
	proc := g.Process()
	if proc == nil {
		return false
	}
	if !g.Gone() && !h.Dying(g) {
		wctx, cancel := context.WithTimeout(ctx, exitReportWait)
		select {
		case <-proc.Done():
		case <-wctx.Done():
		}
		cancel()
		if !g.Gone() {
			return false
		}
	}
	return h.LedgerKept(g)
}

// viaLedger returns the generation that replaces g, dead with the call in
// it, for the call to be sent again with its call id, if that plugin keeps
// a ledger too; otherwise the call's outcome is unknown.
func (r *retrier) viaLedger(ctx context.Context, g *redial.Generation, cause error) (*redial.Generation, error) {
	ng, err := r.next(ctx, g, cause)
	if err != nil || !r.h.LedgerKept(ng) {
		return nil, outcomeUnknown(ctx, r.h, g, r.method, r.attempt, reasonNotIdempotent, cause)
	}
	return ng, nil
}

// holdLedger holds g's ledger for as long as the call lasts, if the call is
// kept in ledgers.
func (r *retrier) holdLedger(g *redial.Generation) {
	if r.ledger {
		r.h.HoldLedger(g)
		r.held = append(r.held, g)
	}
}

// releaseLedgers ends the call's holds, once it can no longer be retried.
func (r *retrier) releaseLedgers() {
	for _, g := range r.held {
		r.h.ReleaseLedger(g)
	}
}

// fromLedger returns the error for the caller of an attempt on g that
// failed with err and the trailer md: a plugin's ledger that answered for a
// dead plugin marks its answer. The call was interrupted in its handler:
// its outcome is unknown. It completed but its response was not kept: the
// error says so. Otherwise err is the call's own outcome.
func (r *retrier) fromLedger(ctx context.Context, g *redial.Generation, md metadata.MD, err error) error {
	v := md.Get(ledgerwire.TrailerKey)
	if len(v) == 0 {
		return err
	}
	switch v[0] {
	case ledgerwire.Interrupted:
		return outcomeUnknown(ctx, r.h, g, r.method, r.attempt, reasonInterrupted, err)
	case ledgerwire.ResponseLost:
		return &responseLostError{Plugin: r.h.Name(), Method: r.method, Err: err}
	}
	return err
}
