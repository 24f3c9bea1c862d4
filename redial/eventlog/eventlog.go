package eventlog

import (
	"context"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"

	"github.com/grpc-respawn/respawn/redial"
)

// The field names respawn adds to mw's.
const (
	EventKey      = "respawn.event"       // the event's kind, as in "respawn-done"
	PluginKey     = "respawn.plugin"      // the Conn's name (redial.WithName)
	GenerationKey = "respawn.generation"  // the plugin the event is about
	AttemptKey    = "respawn.attempt"     // the attempt about to run (retry) or that failed
	PIDKey        = "respawn.pid"         // the exited process's id
	ExitCodeKey   = "respawn.exit_code"   // its exit code, when no signal killed it
	SignalKey     = "respawn.signal"      // the number of the signal that killed it
	SignalNameKey = "respawn.signal_name" // that signal's name, as in "killed"
	ReasonKey     = "respawn.reason"      // why it exited (redial.Exit.Reason), as in "crashed"
	DurationKey   = "respawn.duration_ms" // how long a respawn took, in milliseconds
	ErrorKey      = "error"               // the event's error
)

// Handler returns an event handler for redial.WithEventHandler that logs
// each event to l, one line per event, with the fields and levels described
// in the package documentation. The handler is safe for concurrent use if l
// is; redial calls it from one goroutine at a time. A nil l yields a handler
// that logs nothing.
func Handler(l logging.Logger) func(redial.Event) {
	if l == nil {
		return func(redial.Event) {}
	}
	return func(e redial.Event) {
		ctx := e.Context
		if ctx == nil {
			ctx = context.Background()
		}
		level, msg := describe(e)
		l.Log(ctx, level, msg, Fields(e)...)
	}
}

// describe returns the level and message of e's line.
func describe(e redial.Event) (logging.Level, string) {
	switch e.Kind {
	case redial.EventExit:
		if e.Exit.Reason == "crashed" {
			return logging.LevelWarn, "plugin exited unexpectedly"
		}
		return logging.LevelInfo, "plugin stopped"
	case redial.EventRespawnStart:
		if e.Generation == 1 {
			return logging.LevelInfo, "plugin starting"
		}
		return logging.LevelInfo, "respawn started"
	case redial.EventRespawnDone:
		if e.Err != nil {
			return logging.LevelWarn, "respawn failed"
		}
		return logging.LevelInfo, "respawn done"
	case redial.EventRetry:
		return logging.LevelInfo, "call retried"
	case redial.EventOutcomeUnknown:
		return logging.LevelWarn, "call failed, outcome unknown, not retried"
	case redial.EventBreakerOpen:
		return logging.LevelError, "crash-loop breaker opened"
	case redial.EventBreakerClose:
		return logging.LevelInfo, "crash-loop breaker closed"
	case redial.EventHung:
		return logging.LevelWarn, "plugin hung"
	case redial.EventRotate:
		if e.Err != nil {
			return logging.LevelInfo, "plugin recycled"
		}
		return logging.LevelInfo, "plugin rotated"
	case redial.EventStandbyTaken:
		return logging.LevelInfo, "spare promoted"
	case redial.EventStandbyMissing:
		return logging.LevelWarn, "no spare ready: launching on the critical path"
	case redial.EventStandbyWasted:
		return logging.LevelWarn, "spare discarded without serving"
	case redial.EventStandbyReady:
		return logging.LevelInfo, "spare ready"
	}
	return logging.LevelInfo, "respawn event"
}

// Fields returns e's fields as [Handler] logs them, as key-value pairs,
// for a handler that logs some events itself. It is safe for concurrent use.
func Fields(e redial.Event) logging.Fields {
	f := make(logging.Fields, 0, 24)
	f = append(f, EventKey, e.Kind.String())
	if e.Plugin != "" {
		f = append(f, PluginKey, e.Plugin)
	}
	f = append(f, GenerationKey, e.Generation)
	if e.Method != "" {
		m := interceptors.NewClientCallMeta(e.Method, nil, nil)
		f = append(f,
			logging.ComponentFieldKey, logging.KindClientFieldValue,
			logging.ServiceFieldKey, m.Service,
			logging.MethodFieldKey, m.Method,
			AttemptKey, e.Attempt)
	}
	switch {
	case e.Kind == redial.EventExit, e.Kind == redial.EventStandbyWasted && e.Exit.PID != 0:
		f = append(f, PIDKey, e.Exit.PID)
		if e.Exit.Signal != 0 {
			f = append(f, SignalKey, int(e.Exit.Signal), SignalNameKey, e.Exit.Signal.String())
		} else {
			f = append(f, ExitCodeKey, e.Exit.Code)
		}
		f = append(f, ReasonKey, e.Exit.Reason)
	case e.Exit.PID != 0: // a spare's, ready
		f = append(f, PIDKey, e.Exit.PID)
	}
	if e.Kind == redial.EventRespawnDone || e.Duration != 0 {
		f = append(f, DurationKey, float64(e.Duration.Microseconds())/1000)
	}
	if e.Err != nil {
		f = append(f, ErrorKey, e.Err)
	}
	if e.Context != nil {
		f = f.AppendUnique(logging.ExtractFields(e.Context))
	}
	return f
}
