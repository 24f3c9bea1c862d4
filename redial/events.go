package redial

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// EventKind names what an [Event] reports, as in "respawn-done".
type EventKind string

// The kinds of events, in the order they usually happen. Where one kind
// tells two outcomes apart, Err does: nil for the good one.
const (
	// EventExit: a plugin process exited, also one whose launch failed and
	// a spare's (Generation 0); Exit says how, and Exit.Reason whether
	// redial stopped it.
	EventExit EventKind = "exit"
	// EventRespawnStart: a respawn began. Err is its cause: the failure that
	// condemned the plugin; for a planned replacement (Planned), the
	// [*RecycleError] of recycling, nil for [Conn.Rotate]; nil for the first
	// launch.
	EventRespawnStart EventKind = "respawn-start"
	// EventRespawnDone: a respawn ended after Duration; Err is nil on
	// success, and Generation is then the new plugin's. Planned says it was
	// a planned replacement of a live plugin ([Conn.Rotate], Pacing.Recycle);
	// Spare that a spare (Pacing.Spares) became Generation, without a launch
	// on the critical path.
	EventRespawnDone EventKind = "respawn-done"
	// EventRetry: a call (Method) is being retried, attempt number Attempt;
	// Err is the failure of the previous attempt.
	EventRetry EventKind = "retry"
	// EventOutcomeUnknown: a call that is not idempotent failed after it may
	// have reached the plugin, so it was not retried.
	EventOutcomeUnknown EventKind = "outcome-unknown"
	// EventBreaker: the crash-loop breaker opened, Err its
	// [*CrashLoopError]: too many respawns failed to yield a healthy plugin,
	// and calls fail fast until the cool-down ends or [Conn.Reset]. With Err
	// nil, it closed again, because a plugin (Generation) served a call or
	// Reset was called.
	EventBreaker EventKind = "breaker"
	// EventHung: a health probe found the plugin alive but not answering;
	// Err says how.
	EventHung EventKind = "hung"
	// EventStandby: a spare (Pacing.Spares) is ready: launched, dialled and
	// health-checked, Exit.PID its process's pid, 0 if the hook reported
	// none. With Err saying why, a spare was discarded without serving: it
	// died (Exit is its exit) or never became ready.
	EventStandby EventKind = "standby"
	// EventClosed: [Conn.Close] has stopped the plugins, Err is what it
	// returns, Generation the plugin it stopped (0 if none). It is the
	// last event the handler is given: the ones emitted before it, the
	// exits of the plugins Close stopped among them, have been given
	// before it (or dropped, as counted in [Stats].DroppedEvents), and
	// none comes after it.
	EventClosed EventKind = "closed"
)

// Event is one thing that happened to a [Conn]. Fields that do not apply to
// the Kind are zero.
type Event struct {
	Kind       EventKind
	Plugin     string        // the Conn's name (WithName), "" if it has none
	Time       time.Time     // when it happened
	Generation uint64        // the plugin it is about
	Duration   time.Duration // how long a respawn took
	Method     string        // the call being retried or failed
	Attempt    int           // the attempt about to run (retry) or that failed
	Exit       Exit          // how the process ended and why (EventExit)
	Err        error         // the cause or failure
	Planned    bool          // a planned replacement (EventRespawnStart, EventRespawnDone)
	Spare      bool          // a spare became the plugin (EventRespawnDone)
	// Context is the ctx of the call an event is about (EventRetry,
	// EventOutcomeUnknown), nil for the others: a handler can take request
	// and trace fields from it. The call may be over when the handler runs.
	Context context.Context
}

// LogValue makes an Event print as structured fields with log/slog, the
// same fields, with the same names and values, that redial/eventlog gives
// a go-grpc-middleware logger (there each name has the prefix "respawn."):
// logged as slog.Any("respawn", e), a text handler prints them as eventlog
// does. The fields are listed in the eventlog package's documentation.
func (e Event) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, len(eventFields))
	for _, f := range eventFields {
		if v, ok := f.value(&e); ok {
			attrs = append(attrs, slog.Attr{Key: f.key, Value: v})
		}
	}
	return slog.GroupValue(attrs...)
}

// eventFields is the table of an Event's fields, in the order they are
// logged: the one source of both [Event.LogValue] and redial/eventlog.
// value returns a field's value, and false when it does not apply to e.
var eventFields = [...]struct {
	key   string
	value func(e *Event) (slog.Value, bool)
}{
	{"event", func(e *Event) (slog.Value, bool) { return slog.StringValue(string(e.Kind)), true }},
	{"plugin", func(e *Event) (slog.Value, bool) { return slog.StringValue(e.Plugin), e.Plugin != "" }},
	{"generation", func(e *Event) (slog.Value, bool) { return slog.Uint64Value(e.Generation), true }},
	{"method", func(e *Event) (slog.Value, bool) { return slog.StringValue(e.Method), e.Method != "" }},
	{"attempt", func(e *Event) (slog.Value, bool) { return slog.IntValue(e.Attempt), e.Method != "" }},
	{"pid", func(e *Event) (slog.Value, bool) { return slog.IntValue(e.Exit.PID), e.exited() || e.Exit.PID != 0 }},
	{"exit_code", func(e *Event) (slog.Value, bool) { return slog.IntValue(e.Exit.Code), e.exited() && e.Exit.Signal == 0 }},
	{"signal", func(e *Event) (slog.Value, bool) {
		return slog.IntValue(int(e.Exit.Signal)), e.exited() && e.Exit.Signal != 0
	}},
	{"signal_name", func(e *Event) (slog.Value, bool) {
		return slog.StringValue(e.Exit.Signal.String()), e.exited() && e.Exit.Signal != 0
	}},
	{"oom_killed", func(e *Event) (slog.Value, bool) { return slog.BoolValue(true), e.exited() && e.Exit.OOMKilled }},
	{"reason", func(e *Event) (slog.Value, bool) { return slog.StringValue(string(e.Exit.Reason)), e.exited() }},
	{"duration_ms", func(e *Event) (slog.Value, bool) {
		return slog.Float64Value(float64(e.Duration.Microseconds()) / 1000), e.Kind == EventRespawnDone || e.Duration != 0
	}},
	{"planned", func(e *Event) (slog.Value, bool) { return slog.BoolValue(true), e.Planned }},
	{"spare", func(e *Event) (slog.Value, bool) { return slog.BoolValue(true), e.Spare }},
	{"error", func(e *Event) (slog.Value, bool) { return slog.AnyValue(e.Err), e.Err != nil }},
}

// exited reports whether e is about a process's exit: an [EventExit], or
// a spare discarded after its process died.
func (e *Event) exited() bool {
	return e.Kind == EventExit || e.Kind == EventStandby && e.Err != nil && e.Exit.PID != 0
}

// Stats are counters a metrics adapter can read; see [Conn.Stats].
type Stats struct {
	Exits          uint64 // plugin processes seen exiting, for any reason, failed launches included
	Crashes        uint64 // of those, the ones redial did not stop ([ExitCrashed]): crashes, OOM kills
	Respawns       uint64 // respawns that replaced a plugin; the first launch is not one
	FailedRespawns uint64 // respawns that failed (hook error, panic, timeout, dial)
	Retries        uint64 // call attempts after the first
	OutcomeUnknown uint64 // calls failed as possibly processed
	BreakerOpens   uint64 // times the crash-loop breaker opened
	Hung           uint64 // plugins found hung (Generation.KillHung, as health does)
	CurrentGen     uint64 // the current generation, 0 before the first launch
	DroppedEvents  uint64 // events not delivered: the handler's queue was full, or the Conn closed
	HandlerPanics  uint64 // panics of the event handler, recovered
	Rotations      uint64 // planned replacements done (Rotate, recycling); also counted in Respawns
	SparesTaken    uint64 // spares promoted to current (Pacing.Spares)
	SparesMissing  uint64 // replacements that found no spare ready
	SparesWasted   uint64 // spares discarded: died or never ready
}

type counters struct {
	exits, crashes, respawns, failed, retries, unknown, opens, hung atomic.Uint64
	rotations, taken, missing, wasted                               atomic.Uint64
}

func (c *counters) count(e *Event) {
	switch e.Kind {
	case EventExit:
		c.exits.Add(1)
		if e.Exit.Reason == ExitCrashed {
			c.crashes.Add(1)
		}
	case EventRespawnDone:
		switch {
		case e.Err != nil:
			c.failed.Add(1)
			return
		case e.Generation > 1: // the first launch is not a respawn
			c.respawns.Add(1)
		}
		if e.Planned {
			c.rotations.Add(1)
		}
		if e.Spare {
			c.taken.Add(1)
		}
	case EventRetry:
		c.retries.Add(1)
	case EventOutcomeUnknown:
		c.unknown.Add(1)
	case EventBreaker:
		if e.Err != nil {
			c.opens.Add(1)
		}
	case EventHung:
		c.hung.Add(1)
	case EventStandby:
		if e.Err != nil {
			c.wasted.Add(1)
		}
	}
}
