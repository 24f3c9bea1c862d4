package eventlog

import (
	"context"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"

	"github.com/grpc-respawn/respawn/redial"
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
		l.Log(ctx, level, msg, fields(e)...)
	}
}

// describe returns the level and message of e's line.
func describe(e redial.Event) (logging.Level, string) {
	switch e.Kind {
	case redial.EventExit:
		if e.Exit.Reason == redial.ExitCrashed {
			return logging.LevelWarn, "plugin exited unexpectedly"
		}
		return logging.LevelInfo, "plugin stopped"
	case redial.EventRespawnStart:
		switch {
		case e.Planned && e.Err != nil:
			return logging.LevelInfo, "plugin recycling"
		case e.Planned:
			return logging.LevelInfo, "plugin rotating"
		case e.Generation == 1:
			return logging.LevelInfo, "plugin starting"
		}
		return logging.LevelInfo, "respawn started"
	case redial.EventRespawnDone:
		switch {
		case e.Err != nil:
			return logging.LevelWarn, "respawn failed"
		case e.Planned:
			return logging.LevelInfo, "plugin rotated"
		case e.Spare:
			return logging.LevelInfo, "spare promoted"
		}
		return logging.LevelInfo, "respawn done"
	case redial.EventRetry:
		return logging.LevelInfo, "call retried"
	case redial.EventOutcomeUnknown:
		return logging.LevelWarn, "call failed, outcome unknown, not retried"
	case redial.EventBreaker:
		if e.Err != nil {
			return logging.LevelError, "crash-loop breaker opened"
		}
		return logging.LevelInfo, "crash-loop breaker closed"
	case redial.EventHung:
		return logging.LevelWarn, "plugin hung"
	case redial.EventStandby:
		if e.Err != nil {
			return logging.LevelWarn, "spare discarded without serving"
		}
		return logging.LevelInfo, "spare ready"
	case redial.EventClosed:
		if e.Err != nil {
			return logging.LevelWarn, "closed; a plugin's stop failed"
		}
		return logging.LevelInfo, "closed"
	}
	return logging.LevelInfo, "respawn event"
}

// fields returns e's fields as [Handler] logs them, as key-value pairs,
// for a handler that logs some events itself: [redial.Event.LogValue]'s,
// each name prefixed with "respawn.", then mw's call fields for an event
// about a call, then those in the call's ctx. It is safe for concurrent use.
func fields(e redial.Event) logging.Fields {
	attrs := e.LogValue().Group()
	f := make(logging.Fields, 0, 2*len(attrs)+6)
	for _, a := range attrs {
		f = append(f, prefix+a.Key, a.Value.Any())
	}
	if e.Method != "" {
		m := interceptors.NewClientCallMeta(e.Method, nil, nil)
		f = append(f,
			logging.ComponentFieldKey, logging.KindClientFieldValue,
			logging.ServiceFieldKey, m.Service,
			logging.MethodFieldKey, m.Method)
	}
	if e.Context != nil {
		f = f.AppendUnique(logging.ExtractFields(e.Context))
	}
	return f
}

// prefix sets respawn's field names apart from mw's ("grpc.") and the host's.
const prefix = "respawn."
