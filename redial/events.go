package redial

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

// EventKind names what an [Event] reports.
type EventKind int

// The kinds of events, in the order they usually happen.
const (
	// EventExit: a plugin process exited, also one whose launch failed;
	// Exit says how, and Exit.Reason whether redial stopped it.
	EventExit EventKind = iota + 1
	// EventRespawnStart: a respawn began; Err is the cause.
	EventRespawnStart
	// EventRespawnDone: a respawn ended after Duration; Err is nil on
	// success, and Generation is then the new plugin's.
	EventRespawnDone
	// EventRetry: a call (Method) is being retried, attempt number Attempt;
	// Err is the failure of the previous attempt.
	EventRetry
	// EventOutcomeUnknown: a call that is not idempotent failed after it may
	// have reached the plugin, so it was not retried.
	EventOutcomeUnknown
	// EventBreakerOpen: too many respawns failed to yield a healthy plugin;
	// calls fail fast until the cool-down ends or [Conn.Reset].
	EventBreakerOpen
	// EventBreakerClose: the breaker closed again, because a plugin served a
	// call or [Conn.Reset] was called.
	EventBreakerClose
	// EventHung: a health probe found the plugin alive but not answering.
	EventHung
	// EventRotate: a planned replacement ([Conn.Rotate], recycling) swapped
	// in Generation, after Duration; Err says why it was asked for when
	// recycling ([RecycleError]), nil for a Rotate.
	EventRotate
	// EventStandbyTaken: a spare ([WithStandby]) became Generation, without
	// a launch on the critical path.
	EventStandbyTaken
	// EventStandbyMissing: a plugin had to be replaced and no spare was
	// ready, so a launch is on the critical path.
	EventStandbyMissing
	// EventStandbyWasted: a spare was discarded without serving: it died,
	// or never became ready (Err says why); Exit is its exit if it had one.
	EventStandbyWasted
	// EventStandbyReady: a spare is launched, dialled and health-checked;
	// Exit.PID is its process's pid, 0 if the hook reported none.
	EventStandbyReady
)

var kindNames = [...]string{
	EventExit:           "exit",
	EventRespawnStart:   "respawn-start",
	EventRespawnDone:    "respawn-done",
	EventRetry:          "retry",
	EventOutcomeUnknown: "outcome-unknown",
	EventBreakerOpen:    "breaker-open",
	EventBreakerClose:   "breaker-close",
	EventHung:           "hung",
	EventRotate:         "rotate",
	EventStandbyTaken:   "standby-taken",
	EventStandbyMissing: "standby-missing",
	EventStandbyWasted:  "standby-wasted",
	EventStandbyReady:   "standby-ready",
}

// String returns the kind's name, as in "respawn-done".
func (k EventKind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

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
	// Context is the ctx of the call an event is about (EventRetry,
	// EventOutcomeUnknown), nil for the others: a handler can take request
	// and trace fields from it. The call may be over when the handler runs.
	Context context.Context
}

// LogValue makes an Event print as structured fields with log/slog: kind,
// plugin, generation, and those that apply — duration, method and attempt,
// and for an exit pid, code or signal (number and name), oom_killed if the
// kernel counted an OOM kill (see [Exit.OOMKilled]), and reason.
func (e Event) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("kind", e.Kind.String())}
	if e.Plugin != "" {
		attrs = append(attrs, slog.String("plugin", e.Plugin))
	}
	attrs = append(attrs, slog.Uint64("generation", e.Generation))
	if e.Duration != 0 {
		attrs = append(attrs, slog.Duration("duration", e.Duration))
	}
	if e.Method != "" {
		attrs = append(attrs, slog.String("method", e.Method), slog.Int("attempt", e.Attempt))
	}
	if e.Kind == EventExit {
		attrs = append(attrs, slog.Int("pid", e.Exit.PID))
		if e.Exit.Signal != 0 {
			attrs = append(attrs, slog.Int("signal", int(e.Exit.Signal)), slog.String("signal_name", e.Exit.Signal.String()))
			if e.Exit.OOMKilled {
				attrs = append(attrs, slog.Bool("oom_killed", true))
			}
		} else {
			attrs = append(attrs, slog.Int("code", e.Exit.Code))
		}
		attrs = append(attrs, slog.String("reason", e.Exit.Reason))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("err", e.Err.Error()))
	}
	return slog.GroupValue(attrs...)
}

// Stats are counters a metrics adapter can read; see [Conn.Stats].
type Stats struct {
	Exits          uint64 // plugin processes seen exiting, for any reason, failed launches included
	Crashes        uint64 // of those, the ones redial did not stop (Reason "crashed"): crashes, OOM kills
	Respawns       uint64 // respawns that replaced a plugin; the first launch is not one
	FailedRespawns uint64 // respawns that failed (hook error, panic, timeout, dial)
	Retries        uint64 // call attempts after the first
	OutcomeUnknown uint64 // calls failed as possibly processed
	BreakerOpens   uint64 // times the crash-loop breaker opened
	Hung           uint64 // plugins found hung ([Conn.KillHung], as health does)
	CurrentGen     uint64 // the current generation, 0 before the first launch
	DroppedEvents  uint64 // events not delivered: the handler's queue was full, or the Conn closed
	HandlerPanics  uint64 // panics of the event handler, recovered
	Rotations      uint64 // planned replacements done (Rotate, recycling); also counted in Respawns
	SparesTaken    uint64 // spares promoted to current (WithStandby)
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
		if e.Exit.Reason == proc.Crashed {
			c.crashes.Add(1)
		}
	case EventRespawnDone:
		switch {
		case e.Err != nil:
			c.failed.Add(1)
		case e.Generation > 1: // the first launch is not a respawn
			c.respawns.Add(1)
		}
	case EventRetry:
		c.retries.Add(1)
	case EventOutcomeUnknown:
		c.unknown.Add(1)
	case EventBreakerOpen:
		c.opens.Add(1)
	case EventHung:
		c.hung.Add(1)
	case EventRotate:
		c.rotations.Add(1)
	case EventStandbyTaken:
		c.taken.Add(1)
	case EventStandbyMissing:
		c.missing.Add(1)
	case EventStandbyWasted:
		c.wasted.Add(1)
	}
}
