package health

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/redial"
)

// errHung is the cause the watcher gives redial for the respawn of a hung
// plugin, reported with redial.EventHung: a check failed while the process
// was stopped (Linux), or checks failed too many times in a row while the
// process, if known, still ran. It reaches the host as the Err of
// redial.EventHung; its text starts "health: plugin hung".
//
// A plugin the watcher finds dead rather than hung is respawned with the
// cause redial itself gives a death: the process's exit (an error that
// unwraps to its *exec.ExitError) once it has exited, or, when a change of connection state was confirmed by a
// check that could not reach the plugin, that check's error
// (codes.Unavailable), wrapped.
var errHung = errors.New("health: plugin hung")

// errUnreachable wraps the error of a check that confirmed a change of
// connection state and could not reach the plugin.
var errUnreachable = errors.New("health: plugin unreachable")

// check is the outcome of one round of a grpc.health.v1 check, as passed
// to Config.onCheck: its answer, or a round that went unanswered (a
// check left open across rounds has one outcome per round). It is a plain
// value.
type check struct {
	// Generation is the number of the plugin checked (redial's
	// Generation.Number).
	Generation uint64
	// StateChange: the check confirmed a change of the connection's state
	// to State that may mean the plugin is gone (TRANSIENT_FAILURE, or
	// READY to IDLE or CONNECTING). False: the periodic probe, started in
	// State.
	StateChange bool
	State       connectivity.State
	// Status is what the plugin reported; UNKNOWN when it sent no response.
	Status healthpb.HealthCheckResponse_ServingStatus
	// Duration is the time since the check was sent.
	Duration time.Duration
	// Err is the check's error: nil when the plugin sent a response, a
	// gRPC status error otherwise (codes.DeadlineExceeded for a round
	// that went unanswered).
	Err error
	// Alive is true when the plugin answered, whatever it said.
	Alive bool
	// Failures counts failed rounds in a row on this generation, this one
	// included; 0 when Alive.
	Failures int
	// Busy: the round failed while a process that serves the plugin ran
	// or waited for a CPU; it did not count as a silent one.
	Busy bool
	// HostLate: the round failed while the host itself was late; it did
	// not count as a silent one.
	HostLate bool
}

// genWatch is the watcher's state for one generation.
type genWatch struct {
	w        *watcher
	g        *redial.Generation
	ctx      context.Context       // done when the watcher stops watching g
	failures atomic.Int32          // failed rounds in a row
	silent   atomic.Int32          // of those, the ones with no sign of life
	cause    atomic.Pointer[error] // set once g is condemned
	judged   processes             // the processes whose state weighs when a check fails; see processes
	found    sync.Once             // judged is found
}

// processes returns the processes whose state weighs when a check fails,
// found the first time a round asks: not when g becomes current, where
// the search (the namespace's table of unix sockets, the descriptors of
// the process) would take the CPUs from the recovery that made it current
// (one per Conn when a whole pod's plugins die at once), but a probe
// interval later.
func (gw *genWatch) processes() *processes {
	gw.found.Do(func() { gw.judged = servingProcesses(gw.g) })
	return &gw.judged
}

// stateCheck confirms a change of g's connection to state st with one
// check, given one round to answer.
func (gw *genWatch) stateCheck(st connectivity.State) {
	f := gw.send(st)
	gw.round(f, true)
	f.end()
}

// report passes c to the observer, if any.
func (gw *genWatch) report(c check) {
	if o := gw.w.cfg.onCheck; o != nil {
		o(c)
	}
}

// busyLimit is how many times [Config.Failures] rounds in a row a plugin
// that shows signs of life, or that the host was late to judge, may leave
// unanswered before it is found hung all the same: 30 s with the
// defaults, for a process that spins without serving.
const busyLimit = 10

// sign is what a failed round showed of the plugin's life.
type sign int

const (
	// silent: no sign of life. Config.Failures of these in a row, and the
	// plugin is hung.
	silent sign = iota
	// stopped: the serving processes are stopped by a signal (state T):
	// hung at once.
	stopped
	// busy: a serving process ran, or waited for a CPU, in the last half
	// of the round: slow, not hung.
	busy
	// hostLate: the watcher itself woke late at the end of the round,
	// by more than a tenth of the timeout: the host's goroutines wait for
	// CPUs, and an answer already sent may be waiting to be read. No
	// evidence against the plugin.
	hostLate
)

// judge acts on a failed round, the failures-th in a row, given the
// kernel's samples of the serving processes before and after (see round),
// and whether the watcher woke late. What the kernel says weighs first: a
// stopped process (SIGSTOP) is hung at once, and one that is runnable or
// used CPU time is slow, not hung, so its round does not count as silent;
// nor does one the host was too late to judge. A plugin is hung after
// Failures silent rounds in a row, or busyLimit times as many failed ones.
func (gw *genWatch) judge(failures int, stateChange bool, err error, before, after sample, late bool) sign {
	o := &gw.w.cfg
	if stateChange && status.Code(err) == codes.Unavailable {
		// The connection was lost and cannot be made again: the plugin is
		// gone, even if its process (if known) has not been reaped.
		gw.condemn(fmt.Errorf("%w: %w", errUnreachable, err), false)
		return silent
	}
	p := gw.processes()
	s := silent
	switch {
	case after.ok && after.stopped:
		gw.condemn(fmt.Errorf("%w: process %d stopped (state T), check failed: %w", errHung, p.pids[0], err), true)
		return stopped
	case after.ok && before.ok && after.cpu > before.cpu, after.ok && p.runnable():
		s = busy
	case late:
		s = hostLate
	default:
		if n := int(gw.silent.Add(1)); n >= o.Failures {
			gw.condemn(fmt.Errorf("%w: %d checks failed in a row, last: %w", errHung, n, err), true)
		}
		return silent
	}
	gw.silent.Store(0)
	if failures >= busyLimit*o.Failures {
		gw.condemn(fmt.Errorf("%w: %d checks failed in a row while the process ran or the host was late, last: %w", errHung, failures, err), true)
	}
	return s
}

// condemn asks redial to replace g. A hung plugin is killed, through
// redial.Generation.KillHung, which reports it with redial.EventHung: left
// alone, a stopped or deadlocked process would hold its resources until the
// grace period ends, and calls waiting on it would wait out their deadlines.
func (gw *genWatch) condemn(cause error, hung bool) {
	select {
	case <-gw.g.Retired():
		return // already replaced; the checks failed because of that
	default:
	}
	if p := gw.g.Process(); p != nil && hung {
		if err := context.Cause(p.Exited()); err != nil {
			// Dead, not hung: the checks failed because it died. The
			// cause is the exit, as redial gives it when it sees the
			// exit first.
			cause, hung = err, false
		}
	}
	if !gw.cause.CompareAndSwap(nil, &cause) {
		gw.g.Condemn(*gw.cause.Load())
		return
	}
	if hung {
		gw.g.KillHung(cause)
		return
	}
	gw.g.Condemn(cause)
}
