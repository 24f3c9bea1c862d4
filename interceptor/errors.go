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
	// that is not idempotent and failed after it may have reached the
	// plugin. The plugin may or may not have run it; it was not retried. The
	// plugin is respawned all the same, so the next call works.
	ErrOutcomeUnknown = errors.New("interceptor: outcome unknown")
	// ErrPoisonRequest is matched by the error of a call under which
	// plugins died again and again, of deaths the call may have caused (see
	// [PoisonRequestError]): the request itself appears to kill the plugin
	// (an input that makes it run out of memory, say), so it is not sent to
	// another one.
	ErrPoisonRequest = errors.New("interceptor: the request appears to kill the plugin")
	// ErrPluginGone is matched by the error of a call to a method of
	// [WithBoundMethods] whose plugin is gone: it was not sent to another
	// plugin. Its code is codes.Unavailable.
	ErrPluginGone error = goneError{}
	// ErrStreamBroken is matched by the error of a server stream whose
	// plugin died after the caller had received messages: it was not
	// re-opened (see WithResume for a way to go on). Its code is
	// codes.Aborted (see [StreamBrokenError]), and [Retriable] says no, so
	// that a retry layer does not replay the stream from its start.
	ErrStreamBroken = errors.New("interceptor: the stream broke after the caller received messages")
)

// StreamBrokenError is the error behind [ErrStreamBroken]. It unwraps to
// the failed attempt's error. Its gRPC code is codes.Aborted, to be retried
// "at a higher level": a caller that knows what it already received may
// open the stream again, but a retry layer that re-opens it under the
// caller (go-grpc-middleware's stream retry, which retries Unavailable by
// default, even mid-stream) would deliver the first messages twice.
type StreamBrokenError struct {
	Plugin string // the Conn's plugin (redial.WithName), "" if none
	Method string // the stream's full method name
	Err    error  // the failure, as grpc-go returned it
}

// Error says which stream broke, followed by Err's message.
func (e *StreamBrokenError) Error() string {
	return fmt.Sprintf("interceptor: the stream %s%s broke after the caller received messages, and was not re-opened: %v",
		e.Method, onPlugin(e.Plugin), status.Convert(e.Err).Message())
}

// Is reports whether target is ErrStreamBroken.
func (e *StreamBrokenError) Is(target error) bool { return target == ErrStreamBroken }

// Unwrap returns the failed attempt's error.
func (e *StreamBrokenError) Unwrap() error { return e.Err }

// GRPCStatus lets status.Code see codes.Aborted.
func (e *StreamBrokenError) GRPCStatus() *status.Status {
	return status.New(codes.Aborted, e.Error())
}

func (e *StreamBrokenError) respawnVerdict() {}

type goneError struct{}

func (goneError) Error() string {
	return "interceptor: the call belongs to a plugin that is gone, and was not sent to another"
}

func (goneError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, goneError{}.Error())
}

func (goneError) respawnVerdict() {}

// OutcomeUnknownError is the error behind [ErrOutcomeUnknown]. Its gRPC
// code is codes.Unknown, not the Unavailable of the failure behind it:
// retry layers (go-grpc-middleware's retry by default, grpc-go's retry
// policies as usually set) retry Unavailable, and would run again the very
// call respawn refused to run twice. It unwraps to the attempt's error. Its
// methods only read it, so it may be shared between goroutines.
type OutcomeUnknownError struct {
	// Plugin is the name of the Conn's plugin (redial.WithName), "" if none.
	Plugin string
	// Method is the call's full method name, as in "/pkg.Service/Method".
	Method string
	// Reason says why the call was not sent again.
	Reason OutcomeReason
	// Err is the error of the attempt that may have reached the plugin, as
	// grpc-go returned it.
	Err error
}

// OutcomeReason says why a call that may have reached a dead plugin was not
// sent again. The zero value is NotIdempotent.
type OutcomeReason int

const (
	// NotIdempotent: the method is not known to be idempotent
	// (its proto option, [WithIdempotentMethods], [WithIdempotencyFunc],
	// [Idempotent]).
	NotIdempotent OutcomeReason = iota
	// Committed: an idempotent stream had already received from the plugin,
	// or sent more than [WithReplayBuffer] keeps, so it could not be
	// replayed from its start without the caller seeing something twice or
	// the plugin missing a message.
	Committed
)

// String returns "not idempotent" or "committed".
func (r OutcomeReason) String() string {
	if r == Committed {
		return "committed"
	}
	return "not idempotent"
}

// Error says that Method may or may not have run, and why, followed by the
// message of Err.
func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("interceptor: outcome unknown: %s%s may or may not have run: the plugin failed after the call reached it, and the call could not be sent again (%v): %v",
		e.Method, onPlugin(e.Plugin), e.Reason, status.Convert(e.Err).Message())
}

// Is reports whether target is ErrOutcomeUnknown.
func (e *OutcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

// Unwrap returns the failed attempt's error.
func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

// GRPCStatus lets status.Code see codes.Unknown.
func (e *OutcomeUnknownError) GRPCStatus() *status.Status {
	return status.New(codes.Unknown, e.Error())
}

func (e *OutcomeUnknownError) respawnVerdict() {}

// outcomeUnknown ends a call of method whose attempt-th attempt, on g, may
// have reached the plugin before it died, and is not sent again for why:
// it reports EventOutcomeUnknown and returns the caller's error.
func outcomeUnknown(ctx context.Context, h redial.Handle, g *redial.Generation, method string, attempt int, why OutcomeReason, err error) error {
	emitUnknown(ctx, h, g, method, attempt, err)
	return &OutcomeUnknownError{Plugin: h.Name(), Method: method, Reason: why, Err: err}
}

// emitUnknown reports EventOutcomeUnknown for the attempt-th attempt of a
// call of method on g that ends with err.
func emitUnknown(ctx context.Context, h redial.Handle, g *redial.Generation, method string, attempt int, err error) {
	h.Emit(redial.Event{Kind: redial.EventOutcomeUnknown, Generation: g.Number(), Method: method, Attempt: attempt, Err: err, Context: ctx})
}

// PoisonRequestError is the error behind [ErrPoisonRequest]: Deaths plugins
// died with the call in them, of deaths the call may have caused
// ([redial.Exit.SelfInflicted]): the plugin exited by itself, crashed on a
// signal of its own fault, hung and was killed by redial, or was OOM-killed.
// A plugin killed by another process (a SIGKILL with no OOM kill counted by
// the kernel, on Linux; a SIGTERM) or stopped by redial does not count: the
// call is retried as after any death. Like [OutcomeUnknownError] it carries
// codes.Unknown, so that retry layers do not send it to yet another
// plugin, and unwraps to the last attempt's error. These deaths do not
// count towards the crash-loop breaker that protects the other callers.
type PoisonRequestError struct {
	Plugin string // the Conn's plugin (redial.WithName), "" if none
	Method string // the call's full method name
	Deaths int    // plugins that died with the call in them, maybe of it
	Err    error  // the last attempt's error
}

// Error says how many plugins died under Method, followed by Err's message.
func (e *PoisonRequestError) Error() string {
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
func (e *PoisonRequestError) Is(target error) bool { return target == ErrPoisonRequest }

// Unwrap returns the last attempt's error.
func (e *PoisonRequestError) Unwrap() error { return e.Err }

// GRPCStatus lets status.Code see codes.Unknown.
func (e *PoisonRequestError) GRPCStatus() *status.Status {
	return status.New(codes.Unknown, e.Error())
}

func (e *PoisonRequestError) respawnVerdict() {}

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
