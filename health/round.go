package health

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/probe"
)

// inflight is a health check sent to a plugin and not answered yet. It
// carries no deadline, and stays open across rounds until it is answered
// or ended: the plugin is never woken by a check's deadline or its
// cancellation (RST_STREAM) while the watcher judges it, and an answer
// that comes late, because the plugin was slow or the host was late to
// read it, still counts.
type inflight struct {
	sent   time.Time
	state  connectivity.State // the connection's state it was sent in
	answer chan probe.Result  // the check's result, once
	cancel context.CancelFunc
	done   bool // the result was received
}

// send sends a check on g's own connection, in state st.
func (gw *genWatch) send(st connectivity.State) *inflight {
	ctx, cancel := context.WithCancel(gw.ctx)
	f := &inflight{sent: time.Now(), state: st, answer: make(chan probe.Result, 1), cancel: cancel}
	go func() { f.answer <- probe.Check(ctx, gw.g.ClientConn(), gw.w.cfg.Service, 0) }()
	return f
}

// end ends f, if it is still open, and waits for its goroutine.
func (f *inflight) end() {
	f.cancel()
	if !f.done {
		<-f.answer
		f.done = true
	}
}

// lateFraction: the watcher is late when it wakes at the end of a round
// more than Timeout/lateFraction after it should have.
const lateFraction = 10

// round gives the plugin one Timeout to answer f, and acts on the
// outcome: its answer, or, when none came, what the kernel says of the
// serving processes in the last half of the round (their CPU time, read
// at its middle and its end, and whether one is runnable at its end).
// The first half holds the plugin's reading of the check itself. It
// reports whether f is done; an unanswered f stays open for the next
// round.
func (gw *genWatch) round(f *inflight, stateChange bool) (done bool) {
	timeout := gw.w.cfg.Timeout
	end := time.Now().Add(timeout)
	before := gw.processes().sample()
	for i, d := range [2]time.Duration{timeout / 2, 0} {
		if i == 1 {
			before = gw.processes().sample()
			d = time.Until(end)
		}
		r, answered := gw.wait(f, d)
		if answered {
			gw.answered(f, r, stateChange, before)
			return true
		}
		if gw.ctx.Err() != nil {
			return false
		}
	}
	late := time.Since(end) > timeout/lateFraction
	after := gw.processes().sample()
	took := time.Since(f.sent)
	c := check{
		Generation: gw.g.Number(), StateChange: stateChange, State: f.state, Duration: took,
		Err:      status.Errorf(codes.DeadlineExceeded, "health: no answer %v after the check was sent", took.Round(time.Millisecond)),
		Failures: int(gw.failures.Add(1)),
	}
	gw.mark(&c, gw.judge(c.Failures, stateChange, c.Err, before, after, late))
	gw.report(c)
	return false
}

// wait waits at most d for f's answer, or for the watch of g to end. An
// answer that is there when the time is up counts.
func (gw *genWatch) wait(f *inflight, d time.Duration) (probe.Result, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case r := <-f.answer:
		f.done = true
		return r, true
	case <-t.C:
	case <-gw.ctx.Done():
		return probe.Result{}, false
	}
	select {
	case r := <-f.answer:
		f.done = true
		return r, true
	default:
		return probe.Result{}, false
	}
}

// answered acts on f's result r: an answer, whatever it says, or an error
// without one (no connection, a lost one).
func (gw *genWatch) answered(f *inflight, r probe.Result, stateChange bool, before sample) {
	if gw.ctx.Err() != nil {
		return // we stopped watching g: its connection may be closed under us
	}
	c := check{Generation: gw.g.Number(), StateChange: stateChange, State: f.state, Status: r.Status, Duration: time.Since(f.sent), Err: r.Err, Alive: r.Verdict.Alive()}
	if c.Alive {
		gw.failures.Store(0)
		gw.silent.Store(0)
	} else {
		c.Failures = int(gw.failures.Add(1))
		gw.mark(&c, gw.judge(c.Failures, stateChange, r.Err, before, gw.processes().sample(), false))
	}
	gw.report(c)
}

// mark records on c what its failure showed.
func (gw *genWatch) mark(c *check, s sign) {
	c.Busy = s == busy
	c.HostLate = s == hostLate
}
