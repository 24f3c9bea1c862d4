package redial

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	// ErrClosed is returned by calls made after [Conn.Close]. It carries
	// codes.Canceled, the code grpc-go gives calls on a closed ClientConn.
	ErrClosed error = closedError{}
	// ErrCrashLoop is matched by the [CrashLoopError] returned while the
	// crash-loop breaker is open.
	ErrCrashLoop = errors.New("redial: plugin is crash-looping")
	// ErrRespawnTimeout is matched by a respawn that did not finish within
	// the respawn timeout.
	ErrRespawnTimeout = errors.New("redial: respawn timed out")
	// ErrHookPanic is matched by a respawn whose hook panicked.
	ErrHookPanic = errors.New("redial: respawn hook panicked")
)

// CrashLoopError is returned while the crash-loop breaker is open: Launches
// respawns in a row produced no plugin that served a call. It matches
// [ErrCrashLoop] with errors.Is, unwraps to the last cause, and carries
// codes.Unavailable for gRPC callers.
type CrashLoopError struct {
	Launches int       // respawns in a row that yielded no plugin serving calls
	Until    time.Time // when the breaker lets one launch through again
	Last     error     // the last respawn's failure, or the last cause
}

// Error says how many respawns failed, when the next may run, and why.
func (e *CrashLoopError) Error() string {
	return fmt.Sprintf("redial: plugin is crash-looping: %d respawns in a row failed, next try after %s: %v",
		e.Launches, e.Until.Format(time.TimeOnly), e.Last)
}

// Is reports whether target is ErrCrashLoop.
func (e *CrashLoopError) Is(target error) bool { return target == ErrCrashLoop }

// Unwrap returns the last cause.
func (e *CrashLoopError) Unwrap() error { return e.Last }

// GRPCStatus lets status.Code and status.FromError see codes.Unavailable.
func (e *CrashLoopError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.Error())
}

type closedError struct{}

func (closedError) Error() string { return "redial: connection closed" }
func (closedError) GRPCStatus() *status.Status {
	return status.New(codes.Canceled, "redial: connection closed")
}

// respawnError marks a failed respawn with codes.Unavailable while keeping
// its cause reachable with errors.Is and errors.As.
type respawnError struct{ err error }

func (e *respawnError) Error() string { return "redial: respawn failed: " + e.err.Error() }
func (e *respawnError) Unwrap() error { return e.err }
func (e *respawnError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.Error())
}
