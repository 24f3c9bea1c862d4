package redial

import (
	"cmp"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Operations of a pacer table row. Each launch asks next first and wants
// it granted with the row's delay.
const (
	launchUp     = "launch, comes up"                // next, then succeeded
	launchServes = "launch, comes up, serves a call" // next, succeeded, served
	launchFails  = "launch, fails"                   // next, then failed
	launchPerm   = "launch, fails permanently"       // next, then failed(Permanent(...))
	refused      = "next refused"                    // next returns wantErr
	finalExit    = "plugin exits with a final code"  // stop(FinalExitError)
	reset        = "Reset"
	planned      = "planned launch (rotation, spare)" // planned, granted with delay
	plannedNo    = "planned launch refused"           // planned returns wantErr
	promote      = "spare promoted, comes up"         // admit, then succeeded
	upServes     = "the plugin up last serves a call" // served, by a plugin a launch may be replacing
)

type pacerStep struct {
	at     time.Duration // since the row's start
	op     string
	delay  time.Duration // the delay next must return (launches)
	opened bool          // refused: next must say it opened the breaker
	closes bool          // launchServes: served must say it closed the breaker
	err    error         // refused: the error next must match
}

// TestPacer tests each rule of the pacer with an injected clock: every row
// fails if its rule is deleted.
func TestPacer(t *testing.T) {
	const (
		window   = time.Minute
		coolDown = 30 * time.Second
	)
	tests := []struct {
		name     string
		max      int     // the breaker's launches; 0: 3
		rate     float64 // launches/s; 0: the default
		burst    int
		steps    []pacerStep
		launches int // for the last refusal: the CrashLoopError's counts
		failed   int
	}{
		{
			name: "launches: 3 plugins that serve nothing open the breaker",
			steps: []pacerStep{
				{at: 0, op: launchUp}, {at: time.Second, op: launchUp}, {at: 2 * time.Second, op: launchUp},
				{at: 3 * time.Second, op: refused, opened: true, err: ErrCrashLoop},
				{at: 4 * time.Second, op: refused, err: ErrCrashLoop},
			},
			launches: 3,
		},
		{
			name: "window: a run whose last plugin came up is forgotten after the window",
			steps: []pacerStep{
				{at: 0, op: launchUp}, {at: 30 * time.Second, op: launchUp}, {at: 50 * time.Second, op: launchUp},
				{at: window + time.Second, op: launchUp},
				{at: window + 2*time.Second, op: launchUp},
			},
		},
		{
			name: "failed launches count whatever they lasted",
			steps: []pacerStep{
				{at: 0, op: launchFails},
				{at: 70 * time.Second, op: launchFails, delay: 100 * time.Millisecond},
				{at: 140 * time.Second, op: launchFails, delay: 200 * time.Millisecond},
				{at: 210 * time.Second, op: refused, opened: true, err: ErrCrashLoop},
			},
			launches: 3, failed: 3,
		},
		{
			name: "the text counts launches that came up apart from failed ones",
			steps: []pacerStep{
				{at: 0, op: launchUp}, {at: time.Second, op: launchUp}, {at: 2 * time.Second, op: launchFails},
				{at: 3 * time.Second, op: refused, opened: true, err: ErrCrashLoop},
			},
			launches: 3, failed: 1,
		},
		{
			name: "served: a plugin whose successor is launching cannot forget the run",
			steps: []pacerStep{
				{at: 0, op: launchUp},
				{at: time.Second, op: launchFails},
				{at: 2 * time.Second, op: upServes},
				{at: 3 * time.Second, op: launchFails, delay: 100 * time.Millisecond},
				{at: 4 * time.Second, op: refused, opened: true, err: ErrCrashLoop},
			},
			launches: 3, failed: 2,
		},
		{
			name: "served: the plugin that came up last forgets the run",
			steps: []pacerStep{
				{at: 0, op: launchFails}, {at: time.Second, op: launchFails, delay: 100 * time.Millisecond},
				{at: 2 * time.Second, op: launchUp, delay: 200 * time.Millisecond},
				{at: 3 * time.Second, op: upServes},
				{at: 4 * time.Second, op: launchFails}, {at: 5 * time.Second, op: launchFails, delay: 100 * time.Millisecond},
				{at: 6 * time.Second, op: launchFails, delay: 200 * time.Millisecond},
				{at: 7 * time.Second, op: refused, opened: true, err: ErrCrashLoop},
			},
			launches: 3, failed: 3,
		},
		{
			name: "backoff: failed launches in a row wait longer, one that comes up resets it",
			max:  10,
			steps: []pacerStep{
				{at: 0, op: launchServes},
				{at: time.Second, op: launchFails},
				{at: 2 * time.Second, op: launchFails, delay: 100 * time.Millisecond},
				{at: 3 * time.Second, op: launchUp, delay: 200 * time.Millisecond},
				{at: 4 * time.Second, op: launchFails},
				{at: 5 * time.Second, op: launchServes, delay: 100 * time.Millisecond},
				{at: 6 * time.Second, op: launchServes},
			},
		},
		{
			name: "cool-down: refused until it ends, then one launch at once with the backoff reset",
			steps: []pacerStep{
				{at: 0, op: launchFails},
				{at: time.Second, op: launchFails, delay: 100 * time.Millisecond},
				{at: 2 * time.Second, op: launchFails, delay: 200 * time.Millisecond},
				{at: 3 * time.Second, op: refused, opened: true, err: ErrCrashLoop},
				{at: 3*time.Second + coolDown - time.Millisecond, op: refused, err: ErrCrashLoop},
				{at: 3*time.Second + coolDown, op: launchFails, delay: 0},
				{at: 3*time.Second + coolDown + time.Millisecond, op: refused, opened: true, err: ErrCrashLoop},
			},
			launches: 3, failed: 3,
		},
		{
			name: "half-open: a plugin that serves closes the breaker and forgets the run",
			steps: []pacerStep{
				{at: 0, op: launchUp}, {at: time.Second, op: launchUp}, {at: 2 * time.Second, op: launchUp},
				{at: 3 * time.Second, op: refused, opened: true, err: ErrCrashLoop},
				{at: 3*time.Second + coolDown, op: launchServes, closes: true},
				{at: 4*time.Second + coolDown, op: launchServes},
				{at: 4*time.Second + coolDown, op: launchUp},
				{at: 5*time.Second + coolDown, op: launchUp},
				{at: 6*time.Second + coolDown, op: launchUp},
				{at: 7*time.Second + coolDown, op: refused, opened: true, err: ErrCrashLoop},
			},
			launches: 3,
		},
		{
			name: "rate: plugins that serve and die are launched no faster than the rate after the burst",
			rate: 2, burst: 2,
			steps: []pacerStep{
				{at: 0, op: launchServes},
				{at: 0, op: launchServes},
				{at: 0, op: launchServes, delay: 500 * time.Millisecond},
				{at: 0, op: launchServes, delay: time.Second},
				{at: 10 * time.Second, op: launchServes},
				{at: 10 * time.Second, op: launchServes},
				{at: 10*time.Second + 250*time.Millisecond, op: launchServes, delay: 250 * time.Millisecond},
			},
		},
		{
			name: "rate: the default bucket absorbs a kill every 200ms",
			steps: func() []pacerStep {
				var s []pacerStep
				for i := range 50 {
					s = append(s, pacerStep{at: time.Duration(i) * 200 * time.Millisecond, op: launchServes})
				}
				return s
			}(),
		},
		{
			name: "permanent: a launch that fails permanently is the answer until Reset",
			steps: []pacerStep{
				{at: 0, op: launchPerm},
				{at: time.Hour, op: refused, err: ErrPermanent},
				{at: 2 * time.Hour, op: reset},
				{at: 2 * time.Hour, op: launchUp},
			},
		},
		{
			name: "planned: rotations and spares do not count towards the breaker",
			steps: []pacerStep{
				{at: 0, op: launchUp}, {at: time.Second, op: planned}, {at: 2 * time.Second, op: planned},
				{at: 3 * time.Second, op: planned}, {at: 4 * time.Second, op: launchUp}, {at: 5 * time.Second, op: launchUp},
			},
		},
		{
			name: "planned: refused while the breaker is open",
			steps: []pacerStep{
				{at: 0, op: launchUp}, {at: time.Second, op: launchUp}, {at: 2 * time.Second, op: launchUp},
				{at: 3 * time.Second, op: refused, opened: true, err: ErrCrashLoop},
				{at: 4 * time.Second, op: plannedNo, err: ErrCrashLoop},
				{at: time.Hour, op: launchServes, closes: true}, // half-open, then closed
				{at: time.Hour, op: planned},
			},
			launches: 3,
		},
		{
			name: "planned: refused after a permanent failure",
			steps: []pacerStep{
				{at: 0, op: launchPerm},
				{at: time.Hour, op: plannedNo, err: ErrPermanent},
			},
		},
		{
			name: "planned: takes tokens of the rate bound",
			rate: 1, burst: 2,
			steps: []pacerStep{
				{at: 0, op: planned}, {at: 0, op: planned},
				{at: 0, op: planned, delay: time.Second},
				{at: 0, op: launchUp, delay: 2 * time.Second},
			},
		},
		{
			name: "promotion: a spare promoted counts towards the breaker",
			steps: []pacerStep{
				{at: 0, op: promote}, {at: time.Second, op: promote}, {at: 2 * time.Second, op: promote},
				{at: 3 * time.Second, op: refused, opened: true, err: ErrCrashLoop},
			},
			launches: 3,
		},
		{
			name: "promotion: takes no token of the rate bound",
			rate: 1, burst: 1,
			steps: []pacerStep{
				{at: 0, op: launchUp}, {at: 0, op: promote},
				{at: 0, op: launchUp, delay: time.Second},
			},
		},
		{
			name: "final exit code: no launch until Reset",
			steps: []pacerStep{
				{at: 0, op: launchServes},
				{at: time.Second, op: finalExit},
				{at: time.Hour, op: refused, err: ErrPermanent},
				{at: time.Hour, op: reset},
				{at: time.Hour, op: launchUp},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := defaultOptions()
			WithPacing(Pacing{CrashLoopLaunches: cmp.Or(tt.max, 3), CrashLoopWindow: window, CrashLoopCoolDown: coolDown}).apply(&o)
			WithPacing(Pacing{LaunchRate: tt.rate, LaunchBurst: tt.burst}).apply(&o)
			o.backoff = func() backoff.BackOff {
				b := backoff.NewExponentialBackOff()
				b.InitialInterval, b.RandomizationFactor, b.Multiplier = 100*time.Millisecond, 0, 2
				b.MaxElapsedTime = 0
				b.Reset()
				return b
			}
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			var p pacer
			var last error
			var up uint64 // the generation of the plugin that came up last
			for i, s := range tt.steps {
				now := t0.Add(s.at)
				where := fmt.Sprintf("step %d (%s at %v)", i, s.op, s.at)
				switch s.op {
				case reset:
					p.reset()
					continue
				case finalExit:
					p.stop(&FinalExitError{Exit: Exit{PID: 1, Code: 78}})
					continue
				case promote:
					if opened, err := p.admit(o, now, errors.New("plugin died"), up+1); err != nil || opened {
						t.Fatalf("%s: got %v, opened %v; want admitted", where, err, opened)
					}
					p.succeeded()
					up++
					continue
				case upServes:
					if closed := p.served(up); closed {
						t.Fatalf("%s: served says it closed the breaker", where)
					}
					continue
				case planned, plannedNo:
					delay, err := p.planned(o, now)
					if s.op == plannedNo && !errors.Is(err, s.err) || s.op == planned && (err != nil || delay != s.delay) {
						t.Fatalf("%s: got delay %v, %v; want %v, %v", where, delay, err, s.delay, s.err)
					}
					continue
				}
				delay, opened, err := launch(&p, o, now, errors.New("plugin died"), up+1)
				if s.op == refused {
					if !errors.Is(err, s.err) || opened != s.opened {
						t.Fatalf("%s: got %v, opened %v; want %v, opened %v", where, err, opened, s.err, s.opened)
					}
					last = err
					continue
				}
				if err != nil || delay != s.delay {
					t.Fatalf("%s: got delay %v, %v; want %v, granted", where, delay, err, s.delay)
				}
				switch s.op {
				case launchFails:
					p.failed(errors.New("exited with code 3"))
				case launchPerm:
					p.failed(Permanent(errors.New("not a plugin")))
				case launchUp:
					p.succeeded()
					up++
				case launchServes:
					p.succeeded()
					up++
					if closed := p.served(up); closed != s.closes {
						t.Fatalf("%s: served says it closed the breaker: %v, want %v", where, closed, s.closes)
					}
				}
			}
			var cle *CrashLoopError
			if errors.As(last, &cle) && (cle.Launches != tt.launches || cle.Failed != tt.failed) {
				t.Errorf("CrashLoopError counts %d launches, %d failed; want %d, %d (%v)", cle.Launches, cle.Failed, tt.launches, tt.failed, cle)
			}
		})
	}
}

// launch is what Conn.startLocked asks of p for a launch of generation n
// without a spare: admit it, then the delay. It returns the error that
// refuses it (a *CrashLoopError or a permanent failure) and whether this
// call opened the breaker.
func launch(p *pacer, o options, now time.Time, cause error, n uint64) (delay time.Duration, opened bool, err error) {
	if opened, err = p.admit(o, now, cause, n); err != nil {
		return 0, opened, err
	}
	delay, err = p.delay(o, now)
	return delay, false, err
}
