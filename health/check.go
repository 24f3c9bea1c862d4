package health

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/redial"
)

// The causes the Watcher gives redial for a respawn. They reach the host
// through redial's events and as the last cause of a redial.CrashLoopError;
// test them with errors.Is.
var (
	// ErrExited: the plugin's process exited.
	ErrExited = errors.New("health: plugin exited")
	// ErrUnreachable: the connection changed state and a check could not
	// reach the plugin.
	ErrUnreachable = errors.New("health: plugin unreachable")
	// ErrHung: a check failed while the process was stopped (Linux), or
	// checks failed too many times in a row while the process, if known,
	// still ran.
	ErrHung = errors.New("health: plugin hung")
)

// Trigger says why a [Check] ran. The zero value is no trigger; a Check
// always carries one of the constants below.
type Trigger int

const (
	// Probe: the periodic probe.
	Probe Trigger = iota + 1
	// StateChange: the connection changed state in a way that may mean the
	// plugin is gone.
	StateChange
)

// String returns "probe" or "state-change".
func (t Trigger) String() string {
	switch t {
	case Probe:
		return "probe"
	case StateChange:
		return "state-change"
	}
	return fmt.Sprintf("Trigger(%d)", int(t))
}

// Check is the outcome of one grpc.health.v1 check, as passed to
// [WithCheckHandler]. It is a plain value.
type Check struct {
	Generation uint64
	Trigger    Trigger
	// State is the connection state that triggered a StateChange check, or
	// the state when a Probe started.
	State connectivity.State
	// Status is what the plugin reported; UNKNOWN when it sent no response.
	Status   healthpb.HealthCheckResponse_ServingStatus
	Duration time.Duration
	Err      error
	// Alive is true when the plugin answered, whatever it said.
	Alive bool
	// Failures counts failed checks in a row on this generation, this one
	// included; 0 when Alive.
	Failures int
}

// genWatch is the Watcher's state for one generation.
type genWatch struct {
	w        *Watcher
	g        *redial.Generation
	ctx      context.Context       // done when the Watcher stops watching g
	failures atomic.Int32          // failed checks in a row
	silent   atomic.Int32          // of those, the ones with no sign of life
	cause    atomic.Pointer[error] // set once g is condemned
}

// check runs one health check on g's own connection and acts on the result.
func (gw *genWatch) check(tr Trigger, st connectivity.State) {
	o := &gw.w.o
	pid := 0
	if p := gw.g.Process(); p != nil {
		pid = p.PID
	}
	var before sample
	if pid > 0 {
		before = sampleProcess(pid)
	}
	ctx, cancel := context.WithTimeout(gw.ctx, o.timeout)
	began := time.Now()
	resp, err := healthpb.NewHealthClient(gw.g.ClientConn()).Check(ctx, &healthpb.HealthCheckRequest{Service: o.service})
	took := time.Since(began)
	cancel()
	if gw.ctx.Err() != nil {
		return // we stopped watching g: its connection may be closed under us
	}
	c := Check{Generation: gw.g.Number(), Trigger: tr, State: st, Status: resp.GetStatus(), Duration: took, Err: err, Alive: answered(err)}
	if c.Alive {
		gw.failures.Store(0)
		gw.silent.Store(0)
	} else {
		c.Failures = int(gw.failures.Add(1))
		gw.judge(c.Failures, tr, err, pid, before)
	}
	if o.onCheck != nil {
		o.onCheck(c)
	}
}

// busyLimit is how many times [WithFailures] checks in a row a plugin that
// shows signs of life may leave unanswered before it is found hung all the
// same: 30 s with the defaults, for a process that spins without serving.
const busyLimit = 10

// judge acts on a failed check, the failures-th in a row. What the kernel
// says of the process weighs first: a stopped process (SIGSTOP) is hung at
// once, and one that is runnable or has used CPU time since the check began
// is slow, not hung, so its check does not count as silent. A plugin is
// hung after o.failures silent checks in a row, or busyLimit times as many
// failed ones.
func (gw *genWatch) judge(failures int, tr Trigger, err error, pid int, before sample) {
	o := &gw.w.o
	if tr == StateChange && status.Code(err) == codes.Unavailable {
		// The connection was lost and cannot be made again: the plugin is
		// gone, even if its process (if known) has not been reaped.
		gw.condemn(fmt.Errorf("%w: %w", ErrUnreachable, err), false)
		return
	}
	var after sample
	if pid > 0 {
		after = sampleProcess(pid)
	}
	switch {
	case after.stopped:
		gw.condemn(fmt.Errorf("%w: process %d stopped (state T), check failed: %w", ErrHung, pid, err), true)
	case after.ok && before.ok && after.cpu > before.cpu, after.ok && runnable(pid):
		gw.silent.Store(0)
		if failures >= busyLimit*o.failures {
			gw.condemn(fmt.Errorf("%w: %d checks failed in a row while the process ran, last: %w", ErrHung, failures, err), true)
		}
	default:
		if n := int(gw.silent.Add(1)); n >= o.failures {
			gw.condemn(fmt.Errorf("%w: %d checks failed in a row, last: %w", ErrHung, n, err), true)
		}
	}
}

// answered reports whether err, from a check, came from the plugin. grpc-go
// gives a check that did not get an answer DeadlineExceeded (our timeout),
// Unavailable (no connection) or Canceled (the connection was closed);
// every other code, Unimplemented and NotFound included, was sent by the
// plugin, which is therefore alive.
func answered(err error) bool {
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Unavailable, codes.Canceled:
		return false
	}
	return true
}

// condemn asks redial to replace g. A hung plugin is killed, through
// redial's Conn.KillHung, which reports it with redial.EventHung: left
// alone, a stopped or deadlocked process would hold its resources until the
// grace period ends, and calls waiting on it would wait out their deadlines.
func (gw *genWatch) condemn(cause error, hung bool) {
	select {
	case <-gw.g.Retired():
		return // already replaced; the checks failed because of that
	default:
	}
	p := gw.g.Process()
	if p != nil && hung {
		if e, exited := p.Exit(); exited {
			// Dead, not hung: the checks failed because it died.
			cause, hung = fmt.Errorf("%w: %v", ErrExited, e), false
		}
	}
	if !gw.cause.CompareAndSwap(nil, &cause) {
		gw.w.c.Respawn(gw.g, *gw.cause.Load())
		return
	}
	if hung {
		gw.w.c.KillHung(gw.g, cause)
		return
	}
	gw.w.c.Respawn(gw.g, cause)
}
