package redial

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

var (
	// ErrClosed is returned by calls made after [Conn.Close]. It carries
	// codes.Canceled, the code grpc-go gives calls on a closed ClientConn.
	ErrClosed error = closedError{}
	// ErrCrashLoop is matched by the error returned while the crash-loop
	// breaker is open. That error says how many launches came up and how
	// many failed, quotes the Conn's name, unwraps to the last cause, and
	// carries codes.Unavailable.
	ErrCrashLoop = errors.New("redial: plugin is crash-looping")
	// ErrRespawnTimeout is matched by a respawn that did not finish within
	// the respawn timeout. Such an error does not match
	// context.DeadlineExceeded, which stays the caller's own deadline.
	ErrRespawnTimeout = errors.New("redial: respawn timed out")
	// errHookPanic is matched by a respawn whose hook panicked.
	errHookPanic = errors.New("redial: respawn hook panicked")
	// ErrPermanent is matched by a failure that no respawn can cure: an
	// error a hook marked with [Permanent] (not a plugin, protocol mismatch,
	// binary missing) or the exit of a plugin with a code in
	// Pacing.FinalExitCodes. The Conn then stops launching:
	// every call fails at once with that error (codes.FailedPrecondition)
	// until [Conn.Reset].
	ErrPermanent = errors.New("redial: permanent failure, not respawned")
	// ErrNoPlugin is matched by a call without a deadline that waited for a
	// plugin longer than Pacing.MaxWait allows.
	ErrNoPlugin = errors.New("redial: no plugin ready")
	// ErrPluginGone is matched by the error of a call bound to one plugin
	// instance (a method of interceptor.WithBoundMethods, such as one that
	// carries a go-plugin broker id) whose plugin is gone: it was not sent
	// to another plugin. Its code is codes.Unavailable. It lives here, with
	// the errors a hook handles, so that no hook imports the policy.
	ErrPluginGone error = goneError{}
)

// Permanent marks err, returned by a [Respawner], as one that launching
// again cannot cure, like backoff.Permanent: the Conn does not respawn and
// callers get the error at once. The result matches [ErrPermanent] and
// unwraps to err. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string        { return e.err.Error() }
func (e *permanentError) Unwrap() error        { return e.err }
func (e *permanentError) Is(target error) bool { return target == ErrPermanent }
func (e *permanentError) GRPCStatus() *status.Status {
	return status.New(codes.FailedPrecondition, e.Error())
}

// CrashLoopError is returned while the crash-loop breaker is open: Launches
// plugins in a row, of which Failed never came up, served no call. It
// matches [ErrCrashLoop] with errors.Is, unwraps to the last cause, and
// carries codes.Unavailable for gRPC callers. A host reaches its fields
// with errors.As: when the next launch may run (Until), and why the last
// one failed (Last).
type CrashLoopError struct {
	Plugin   string    // the Conn's name (WithName), "" if it has none
	Launches int       // launches in a row that yielded no plugin serving calls
	Failed   int       // how many of them failed to start (hook error, timeout, not ready)
	Until    time.Time // when the breaker lets one launch through again
	Last     error     // the last launch's failure, or what killed the last plugin
}

// Error says how many launches served nothing, how many of them failed,
// when the next may run, and the last cause.
func (e *CrashLoopError) Error() string {
	what := fmt.Sprintf("%d launches in a row served no call", e.Launches)
	switch e.Failed {
	case 0:
	case e.Launches:
		what = fmt.Sprintf("%d launches in a row failed", e.Launches)
	default:
		what += fmt.Sprintf(" (%d failed to start)", e.Failed)
	}
	return fmt.Sprintf("redial: %s is crash-looping: %s; next try after %s; last: %v",
		pluginName(e.Plugin), what, e.Until.Format(time.TimeOnly), e.Last)
}

// pluginName is how errors and logs name a plugin: "plugin" or
// `plugin "objectstore"`.
func pluginName(name string) string {
	if name == "" {
		return "plugin"
	}
	return fmt.Sprintf("plugin %q", name)
}

// Is reports whether target is ErrCrashLoop.
func (e *CrashLoopError) Is(target error) bool { return target == ErrCrashLoop }

// Unwrap returns the last cause.
func (e *CrashLoopError) Unwrap() error { return e.Last }

// GRPCStatus lets status.Code and status.FromError see codes.Unavailable.
func (e *CrashLoopError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.Error())
}

// FinalExitError is returned once a plugin exited with a code the host
// declared final with Pacing.FinalExitCodes (systemd's
// RestartPreventExitStatus): the Conn does not respawn it until
// [Conn.Reset]. It matches [ErrPermanent] and carries
// codes.FailedPrecondition. A host reaches its fields with errors.As: the
// exit and what the plugin last wrote to stderr.
type FinalExitError struct {
	Plugin string // the Conn's name (WithName), "" if it has none
	Exit   Exit   // how the plugin ended
	Stderr string // the end of its stderr, if the hook kept it
	from   error  // the launch failure it ended, if it ended one
}

// Unwrap returns the launch failure the exit ended, if any.
func (e *FinalExitError) Unwrap() error { return e.from }

// Error names the exit and quotes the stderr tail.
func (e *FinalExitError) Error() string {
	s := fmt.Sprintf("redial: %s: %s, a final exit code: not respawned", pluginName(e.Plugin), e.Exit.describe())
	if e.Stderr != "" {
		s += "; stderr: " + proc.QuoteTail(e.Stderr)
	}
	return s
}

// Is reports whether target is ErrPermanent.
func (e *FinalExitError) Is(target error) bool { return target == ErrPermanent }

// GRPCStatus lets status.Code see codes.FailedPrecondition.
func (e *FinalExitError) GRPCStatus() *status.Status {
	return status.New(codes.FailedPrecondition, e.Error())
}

type goneError struct{}

func (goneError) Error() string {
	return "redial: the call belongs to a plugin that is gone, and was not sent to another"
}
func (goneError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, goneError{}.Error())
}

type closedError struct{}

func (closedError) Error() string { return "redial: connection closed" }
func (closedError) GRPCStatus() *status.Status {
	return status.New(codes.Canceled, "redial: connection closed")
}

// errZeroConn is what the calls of a zero Conn return: it matches
// ErrClosed, and carries the same code.
var errZeroConn error = zeroConnError{}

type zeroConnError struct{}

const zeroConnText = "redial: a zero Conn, not made by redial.New, is closed"

func (zeroConnError) Error() string        { return zeroConnText }
func (zeroConnError) Is(target error) bool { return target == ErrClosed }
func (zeroConnError) GRPCStatus() *status.Status {
	return status.New(codes.Canceled, zeroConnText)
}

// respawnError marks a failed respawn with codes.Unavailable (or
// codes.FailedPrecondition for a permanent failure) while keeping its cause
// reachable with errors.Is and errors.As.
type respawnError struct {
	plugin string // the Conn's name
	err    error
}

func (e *respawnError) Error() string {
	return fmt.Sprintf("redial: respawn of %s failed: %v", pluginName(e.plugin), e.err)
}
func (e *respawnError) Unwrap() error { return e.err }
func (e *respawnError) GRPCStatus() *status.Status {
	code := codes.Unavailable
	if errors.Is(e.err, ErrPermanent) {
		code = codes.FailedPrecondition
	}
	return status.New(code, e.Error())
}

// timeoutError is a respawn cut short by the respawn timeout. It keeps the
// text of what was interrupted but not its chain: that chain ends in
// context.DeadlineExceeded, which callers take for their own deadline.
type timeoutError struct {
	plugin string // the Conn's name
	after  time.Duration
	cut    string // what was interrupted, in words
}

func (e *timeoutError) Error() string {
	s := fmt.Sprintf("redial: respawn of %s timed out after %v", pluginName(e.plugin), e.after)
	if e.cut != "" {
		s += ": " + e.cut
	}
	return s
}
func (e *timeoutError) Is(target error) bool { return target == ErrRespawnTimeout }

// waitError is a caller that stopped waiting for a plugin: its own ctx
// ended (it unwraps to ctx.Err() and carries DeadlineExceeded or Canceled),
// or, without a deadline, Pacing.MaxWait ran out (it matches ErrNoPlugin and
// carries Unavailable). A Connect's also unwraps to the last launch's
// failure.
type waitError struct {
	plugin string // the Conn's name
	err    error  // ctx.Err(), or ErrNoPlugin
	max    time.Duration
	last   error // the running respawn's cause, for the text
	failed error // the last failed launch, if the waiter made any
}

func (e *waitError) Error() string {
	s := fmt.Sprintf("redial: waiting for %s: %v", pluginName(e.plugin), e.err)
	if e.err == ErrNoPlugin {
		s = fmt.Sprintf("redial: no %s ready within %v (the call has no deadline)", pluginName(e.plugin), e.max)
	}
	if e.last != nil {
		s += "; respawning after: " + e.last.Error()
	}
	if e.failed != nil {
		s += "; last launch: " + e.failed.Error()
	}
	return s
}
func (e *waitError) Unwrap() []error {
	if e.failed == nil {
		return []error{e.err}
	}
	return []error{e.err, e.failed}
}
func (e *waitError) GRPCStatus() *status.Status {
	if e.err == ErrNoPlugin {
		return status.New(codes.Unavailable, e.Error())
	}
	return status.New(status.FromContextError(e.err).Code(), e.Error())
}
