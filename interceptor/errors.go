package interceptor

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrOutcomeUnknown is matched, with errors.Is, by the error of a call that
// is not idempotent and failed after it may have reached the plugin. The
// plugin may or may not have run it; it was not retried. The plugin is
// respawned all the same, so the next call works.
var ErrOutcomeUnknown = errors.New("interceptor: outcome unknown")

// OutcomeUnknownError is the error behind [ErrOutcomeUnknown]. It keeps
// codes.Unavailable for gRPC callers and unwraps to the attempt's error.
// Its methods only read it, so it may be shared between goroutines.
type OutcomeUnknownError struct {
	// Method is the call's full method name, as in "/pkg.Service/Method".
	Method string
	// Err is the error of the attempt that may have reached the plugin, as
	// grpc-go returned it.
	Err error
}

// Error says that Method may or may not have run, and why, followed by the
// message of Err.
func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("interceptor: outcome unknown: %s may or may not have run: the plugin failed after the call reached it, and the method is not idempotent, so it was not retried: %v",
		e.Method, status.Convert(e.Err).Message())
}

// Is reports whether target is ErrOutcomeUnknown.
func (e *OutcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

// Unwrap returns the failed attempt's error.
func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

// GRPCStatus lets status.Code see codes.Unavailable.
func (e *OutcomeUnknownError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.Error())
}

func (e *OutcomeUnknownError) unknownOutcome() {}
