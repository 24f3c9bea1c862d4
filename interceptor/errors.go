package interceptor

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/redial"
)

var (
	// ErrOutcomeUnknown is matched, with errors.Is, by the error of a call
	// that failed after it may have reached the plugin and could not be sent
	// again: its method is not known to be idempotent, or it is a stream that
	// had committed (it had received from the plugin, or sent more than
	// [Limits].ReplayBuffer keeps). The plugin may or may not have run it. The
	// plugin is respawned all the same, so the next call works. The error
	// names the method, the plugin (redial.WithName) and which of the
	// reasons held ("not idempotent", "committed", or, for a call kept in
	// the plugins' ledgers ([WithLedger]), "interrupted in its handler":
	// the dead plugin's ledger shows it was running it; for a client stream
	// kept there, larger than [Limits].ReplayBuffer, "never started, and
	// could not be replayed" or "did not take effect, and could not be
	// replayed"), and unwraps to the
	// failed attempt's error. Its gRPC code is codes.Unknown, not the
	// Unavailable of the failure behind it: retry layers (go-grpc-middleware's
	// retry by default, grpc-go's retry policies as usually set) retry
	// Unavailable, and would run again the very call respawn refused to run
	// twice.
	ErrOutcomeUnknown = errors.New("interceptor: outcome unknown")
	// ErrPoisonRequest is matched by the error of a call under which
	// plugins died again and again, of deaths the call may have caused
	// ([redial.Exit.SelfInflicted]: the plugin exited by itself, crashed on
	// a signal of its own fault, hung and was killed by redial, or was
	// OOM-killed): the request itself appears to kill the plugin (an input
	// that makes it run out of memory, say), so it is not sent to another
	// one. A plugin killed by another process (a SIGKILL with no OOM kill
	// counted by the kernel, on Linux; a SIGTERM) or stopped by redial does
	// not count: the call is retried as after any death. The error names
	// the method, the plugin and how many plugins died under the call, and
	// unwraps to the last attempt's error. Its code is codes.Unknown, as
	// [ErrOutcomeUnknown]'s, so that retry layers do not send it to yet
	// another plugin. These deaths do not count towards the crash-loop
	// breaker that protects the other callers.
	ErrPoisonRequest = errors.New("interceptor: the request appears to kill the plugin")
	// ErrStreamBroken is matched by the error of a server stream whose
	// plugin died after the caller had received messages: it was not
	// re-opened (see [WithResume] for a way to go on). The error names the
	// method and the plugin, and unwraps to the failed attempt's error. Its
	// code is codes.Aborted, to be retried "at a higher level": a caller
	// that knows what it already received may open the stream again, but a
	// retry layer that re-opens it under the caller (go-grpc-middleware's
	// stream retry, which retries Unavailable by default, even mid-stream)
	// would deliver the first messages twice; [Retriable] says no.
	ErrStreamBroken = errors.New("interceptor: the stream broke after the caller received messages")
	// ErrResponseLost is matched by the error of a call kept in the plugins'
	// ledgers ([WithLedger]) whose plugin died after the call had completed,
	// but before its response reached the host, when the response was too
	// large for the ledger to keep (package ledger's Config.MaxResponse) or
	// could not be decoded: the call ran once, and was not run again, but its
	// response is gone. The error names the method and the plugin, and
	// unwraps to the successor's answer. Its code is codes.DataLoss, which no
	// retry layer retries by default.
	ErrResponseLost = errors.New("interceptor: the call completed once, and its response is gone")
)

// responseLostError is the error behind [ErrResponseLost].
type responseLostError struct {
	Plugin string // the Conn's plugin (redial.WithName), "" if none
	Method string // the call's full method name
	Err    error  // the successor's answer
}

// Error says which call's response is gone.
func (e *responseLostError) Error() string {
	return fmt.Sprintf("interceptor: %s%s completed once, before its plugin died, and was not run again; its response was not kept, so it is gone: %v",
		e.Method, onPlugin(e.Plugin), status.Convert(e.Err).Message())
}

// Is reports whether target is ErrResponseLost.
func (e *responseLostError) Is(target error) bool { return target == ErrResponseLost }

// Unwrap returns the successor's answer.
func (e *responseLostError) Unwrap() error { return e.Err }

// GRPCStatus lets status.Code see codes.DataLoss.
func (e *responseLostError) GRPCStatus() *status.Status {
	return status.New(codes.DataLoss, e.Error())
}

func (e *responseLostError) respawnVerdict() {}

// streamBrokenError is the error behind [ErrStreamBroken].
type streamBrokenError struct {
	Plugin string // the Conn's plugin (redial.WithName), "" if none
	Method string // the stream's full method name
	Err    error  // the failure, as grpc-go returned it
}

// Error says which stream broke, followed by Err's message.
func (e *streamBrokenError) Error() string {
	return fmt.Sprintf("interceptor: the stream %s%s broke after the caller received messages, and was not re-opened: %v",
		e.Method, onPlugin(e.Plugin), status.Convert(e.Err).Message())
}

// Is reports whether target is ErrStreamBroken.
func (e *streamBrokenError) Is(target error) bool { return target == ErrStreamBroken }

// Unwrap returns the failed attempt's error.
func (e *streamBrokenError) Unwrap() error { return e.Err }

// GRPCStatus lets status.Code see codes.Aborted.
func (e *streamBrokenError) GRPCStatus() *status.Status {
	return status.New(codes.Aborted, e.Error())
}

func (e *streamBrokenError) respawnVerdict() {}

// outcomeUnknownError is the error behind [ErrOutcomeUnknown]. Its
// methods only read it, so it may be shared between goroutines.
type outcomeUnknownError struct {
	// Plugin is the name of the Conn's plugin (redial.WithName), "" if none.
	Plugin string
	// Method is the call's full method name, as in "/pkg.Service/Method".
	Method string
	// Reason says why the call was not sent again.
	Reason outcomeReason
	// Err is the error of the attempt that may have reached the plugin, as
	// grpc-go returned it.
	Err error
}

// outcomeReason says why a call that may have reached a dead plugin was not
// sent again. The zero value is reasonNotIdempotent.
type outcomeReason int

const (
	// reasonNotIdempotent: the method is not known to be idempotent
	// (its proto option, WithIdempotentMethods, WithIdempotencyFunc).
	reasonNotIdempotent outcomeReason = iota
	// reasonCommitted: an idempotent stream had already received from the plugin,
	// or sent more than Limits.ReplayBuffer keeps, so it could not be
	// replayed from its start without the caller seeing something twice or
	// the plugin missing a message.
	reasonCommitted
	// reasonInterrupted: the call was kept in the plugins' ledgers
	// (WithLedger), and the dead plugin's ledger shows that it was in its
	// handler when the plugin died; no resolver of the plugin's could tell
	// whether it took effect.
	reasonInterrupted
	// reasonNotStarted: a client stream kept in the plugins' ledgers that
	// no dead plugin had started, larger than Limits.ReplayBuffer: it
	// could not be sent again.
	reasonNotStarted
	// reasonNotTakenEffect: a client stream kept in the plugins' ledgers
	// whose resolver found it had not taken effect, larger than
	// Limits.ReplayBuffer: it could not be sent again.
	reasonNotTakenEffect
)

// String says the reason in words, as the error's message gives it.
func (r outcomeReason) String() string {
	switch r {
	case reasonCommitted:
		return "committed"
	case reasonInterrupted:
		return "interrupted in its handler"
	case reasonNotStarted:
		return "never started, and could not be replayed"
	case reasonNotTakenEffect:
		return "did not take effect, and could not be replayed"
	}
	return "not idempotent"
}

// Error says that Method may or may not have run, and why, followed by the
// message of Err.
func (e *outcomeUnknownError) Error() string {
	return fmt.Sprintf("interceptor: outcome unknown: %s%s may or may not have run: the plugin failed after the call reached it, and the call could not be sent again (%v): %v",
		e.Method, onPlugin(e.Plugin), e.Reason, status.Convert(e.Err).Message())
}

// Is reports whether target is ErrOutcomeUnknown.
func (e *outcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

// Unwrap returns the failed attempt's error.
func (e *outcomeUnknownError) Unwrap() error { return e.Err }

// GRPCStatus lets status.Code see codes.Unknown.
func (e *outcomeUnknownError) GRPCStatus() *status.Status {
	return status.New(codes.Unknown, e.Error())
}

func (e *outcomeUnknownError) respawnVerdict() {}

// outcomeUnknown ends a call of method whose attempt-th attempt, on g, may
// have reached the plugin before it died, and is not sent again for why:
// it reports EventOutcomeUnknown and returns the caller's error.
func outcomeUnknown(ctx context.Context, h redial.Handle, g *redial.Generation, method string, attempt int, why outcomeReason, err error) error {
	emitUnknown(ctx, h, g, method, attempt, err)
	return &outcomeUnknownError{Plugin: h.Name(), Method: method, Reason: why, Err: err}
}

// emitUnknown reports EventOutcomeUnknown for the attempt-th attempt of a
// call of method on g that ends with err.
func emitUnknown(ctx context.Context, h redial.Handle, g *redial.Generation, method string, attempt int, err error) {
	h.Emit(redial.Event{Kind: redial.EventOutcomeUnknown, Generation: g.Number(), Method: method, Attempt: attempt, Err: err, Context: ctx})
}

// ctxEnded is the error of a call whose caller's ctx ended as its attempt
// failed with err: a status with the ctx's code (Canceled or
// DeadlineExceeded), as grpc-go gives, and err's text after the ctx's.
func ctxEnded(ctx context.Context, err error) error {
	s := status.FromContextError(ctx.Err())
	if status.Code(err) == s.Code() {
		return err
	}
	return status.Errorf(s.Code(), "%s, as the attempt failed: %s", s.Message(), status.Convert(err).Message())
}

// poisonRequestError is the error behind [ErrPoisonRequest].
type poisonRequestError struct {
	Plugin string // the Conn's plugin (redial.WithName), "" if none
	Method string // the call's full method name
	Deaths int    // plugins that died with the call in them, maybe of it
	Err    error  // the last attempt's error
}

// Error says how many plugins died under Method, followed by Err's message.
func (e *poisonRequestError) Error() string {
	return fmt.Sprintf("interceptor: %s%s appears to kill the plugin: %d plugins died with the call in them, so it was not sent to another: %v",
		e.Method, onPlugin(e.Plugin), e.Deaths, status.Convert(e.Err).Message())
}

// onPlugin names a plugin after a method: ` on plugin "objectstore"`.
func onPlugin(name string) string {
	if name == "" {
		return ""
	}
	return fmt.Sprintf(" on plugin %q", name)
}

// Is reports whether target is ErrPoisonRequest.
func (e *poisonRequestError) Is(target error) bool { return target == ErrPoisonRequest }

// Unwrap returns the last attempt's error.
func (e *poisonRequestError) Unwrap() error { return e.Err }

// GRPCStatus lets status.Code see codes.Unknown.
func (e *poisonRequestError) GRPCStatus() *status.Status {
	return status.New(codes.Unknown, e.Error())
}

func (e *poisonRequestError) respawnVerdict() {}

// Retriable reports whether a retry layer outside respawn may try err's
// call again: for the codes go-grpc-middleware's retry retries by default
// (Unavailable, ResourceExhausted), except respawn's own verdicts — an
// outcome unknown, a poison request, a call bound to a plugin that is gone,
// a crash-looping plugin, a closed Conn — and the caller's own context
// errors. Pass it to
// go-grpc-middleware's retry.WithRetriable. It is safe for concurrent use.
func Retriable(err error) bool {
	switch {
	case err == nil, isOurVerdict(err),
		errors.Is(err, redial.ErrCrashLoop), errors.Is(err, redial.ErrClosed),
		errors.Is(err, redial.ErrPermanent), errors.Is(err, redial.ErrNoPlugin),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted:
		return true
	}
	return false
}
