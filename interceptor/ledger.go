package interceptor

// A call that is not idempotent, retried through the plugins' ledgers
// (WithLedger, package ledger): sent again, with the same ledger id, to the
// successor of a plugin that died with it, whose ledger answers from the
// dead plugin's record rather than run it twice.

import (
	"context"
	"strings"

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

// withLedgerID returns ctx with a fresh ledger id of the call's own, once
// withoutLedgerKeys has dropped any it carried.
func withLedgerID(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(withoutLedgerKeys(ctx), ledgerwire.IDKey, newCallID())
}

// withoutLedgerKeys returns ctx without the ledger keys it carries (a
// plugin that forwards its incoming metadata, a caller's): a call is
// answered only from its own record, and one the host does not keep in
// ledgers from none. A ctx without outgoing metadata costs one lookup and
// no allocation; one with metadata costs the copy that
// [metadata.FromOutgoingContext] makes, and a new ctx only when there is a
// key to drop.
func withoutLedgerKeys(ctx context.Context) context.Context {
	md, ok := metadata.FromOutgoingContext(ctx)
	if !ok || (len(md[ledgerwire.IDKey]) == 0 && len(md[ledgerwire.RetryKey]) == 0) {
		return ctx
	}
	delete(md, ledgerwire.IDKey)
	delete(md, ledgerwire.RetryKey)
	return metadata.NewOutgoingContext(ctx, md)
}

// deadLedger returns the name of g's ledger file if g's plugin kept a
// ledger and its process is dead, within exitReportWait, so that its
// ledger holds all it will ever hold: exited, or, with its death under way
// (a zombie, a SIGKILL pending), unable to run another instruction. A lost
// connection to a process that still runs is no such evidence: it might
// yet record and run the call.
func deadLedger(ctx context.Context, g *redial.Generation) string {
	proc := g.Process()
	if proc == nil || !proc.Await(ctx, exitReportWait) {
		return ""
	}
	return g.Ledger().Kept()
}

// viaLedger returns the generation that replaces g, dead with the call in
// it and with its ledger file named file, for the call to be sent again
// with its ledger id; from then on the call goes only to plugins that keep
// a ledger (see open), and otherwise its outcome is unknown.
func (r *retrier) viaLedger(ctx context.Context, g *redial.Generation, file string, cause error) (*redial.Generation, error) {
	r.deadFiles = append(r.deadFiles, file)
	ng, err := r.next(ctx, g, cause)
	if err != nil {
		return nil, outcomeUnknown(ctx, r.h, g, r.method, r.attempt, reasonNotIdempotent, cause)
	}
	return ng, nil
}

// ledgerAttempt returns the ctx of an attempt of a call kept in ledgers on
// g, which marks it a retry naming the dead plugins' ledgers, or an error if
// the call may have run on a dead plugin and g keeps no ledger: g could not
// tell, and might run it again.
func (r *retrier) ledgerAttempt(ctx context.Context, g *redial.Generation, cause error) (context.Context, error) {
	if len(r.deadFiles) == 0 {
		return ctx, nil // nothing of it ran anywhere: the plugin just runs it
	}
	if len(r.deadFiles) > ledgerwire.MaxRetryFiles || g.Ledger().Kept() == "" {
		return nil, outcomeUnknown(ctx, r.h, g, r.method, r.attempt, reasonNotIdempotent, cause)
	}
	return metadata.AppendToOutgoingContext(ctx, ledgerwire.RetryKey, strings.Join(r.deadFiles, ",")), nil
}

// holdLedger holds g's ledger for as long as the call lasts, if the call is
// kept in ledgers.
func (r *retrier) holdLedger(g *redial.Generation) {
	if r.ledger {
		g.Ledger().Hold()
		r.held = append(r.held, g)
	}
}

// releaseLedgers ends the call's holds, once it can no longer be retried.
func (r *retrier) releaseLedgers() {
	for _, g := range r.held {
		g.Ledger().Release()
	}
}

// fromLedger returns the error for the caller of an attempt on g that
// failed with err and the trailer md, for a call that may have run on a
// dead plugin. A plugin's ledger that answered for a dead plugin marks its
// answer. The call was interrupted in its handler, or the ledgers could
// not be read: its outcome is unknown. It completed but its response was not
// kept: the error says so. The caller's ctx ended during the attempt: the
// successor may have been running it, so its outcome is unknown too.
// Otherwise err is the call's own outcome.
func (r *retrier) fromLedger(ctx context.Context, g *redial.Generation, md metadata.MD, err error) error {
	if len(r.deadFiles) == 0 {
		return err
	}
	switch v := md.Get(ledgerwire.TrailerKey); {
	case len(v) == 0:
		if ctx.Err() != nil {
			return outcomeUnknown(ctx, r.h, g, r.method, r.attempt, reasonNotIdempotent, err)
		}
		return err
	case v[0] == ledgerwire.Interrupted:
		return outcomeUnknown(ctx, r.h, g, r.method, r.attempt, reasonInterrupted, err)
	case v[0] == ledgerwire.ResponseLost:
		return &responseLostError{Plugin: r.h.Name(), Method: r.method, Err: err}
	case v[0] == ledgerwire.Replayed:
		return err // the call's recorded failure
	case v[0] == ledgerwire.NotStarted:
		return outcomeUnknown(ctx, r.h, g, r.method, r.attempt, reasonNotStarted, err)
	case v[0] == ledgerwire.NotReplayable:
		return outcomeUnknown(ctx, r.h, g, r.method, r.attempt, reasonNotTakenEffect, err)
	}
	return outcomeUnknown(ctx, r.h, g, r.method, r.attempt, reasonNotIdempotent, err)
}
