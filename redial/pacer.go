package redial

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// pacer decides when the next launch may run, whatever the plugin does.
// Its rules, each tested by a row of TestPacer:
//
//   - rate: every launch takes a token from a bucket that refills at
//     Pacing.LaunchRate, so the sustained launch rate is bounded even
//     for a plugin that serves one call and dies;
//   - backoff: a launch after a failed one (the hook erred, timed out, or
//     the plugin never became ready) waits the backoff; the first launch
//     after a plugin that came up runs at once;
//   - breaker: maxLaunches launches in a row that yield no plugin serving a
//     call open the breaker for coolDown. A run in which the last launch
//     came up is forgotten once window has passed since its first launch;
//     a failed launch counts whatever it lasted, so slow failures (respawn
//     timeouts) cannot outrun the window;
//   - served: a call served by the current plugin forgets the run, unless
//     a launch to replace that plugin has been admitted: a plugin that
//     takes a call as it dies (the call is judged after its successors
//     began failing) cannot reset the count of those successors;
//   - half-open: after the cool-down one launch runs at once, with the
//     backoff reset; if it serves nothing, the breaker opens again;
//   - permanent: a failure that matches [ErrPermanent] stops all launches
//     until reset.
//
// Guarded by Conn.mu.
type pacer struct {
	launches  int       // launches since a plugin last served a call
	notUp     int       // of those, how many failed to start
	failures  int       // failed launches in a row, for the backoff
	first     time.Time // when the first of the launches started
	openUntil time.Time // breaker open until then; zero when closed or half-open
	open      bool      // open or half-open: no plugin has served a call since it opened
	last      error     // the last failed launch since a plugin came up
	newest    uint64    // the generation the last admitted launch is for
	permanent error     // set: no more launches until reset
	bo        backoff.BackOff
	bucket    tokenBucket
}

// reset forgets failures and closes the breaker; the rate bound's tokens
// are kept, since it holds whatever happens.
func (p *pacer) reset() {
	*p = pacer{bucket: p.bucket}
}

// served is called when generation n, the current plugin, served a call.
// It reports whether that closed the breaker.
func (p *pacer) served(n uint64) (closed bool) {
	if n < p.newest { // its successor's launch is what counts now
		return false
	}
	closed = p.open
	p.launches, p.notUp, p.failures, p.bo, p.last = 0, 0, 0, nil, nil
	p.open, p.openUntil = false, time.Time{}
	return closed
}

// failed is called when a launch failed with err.
func (p *pacer) failed(err error) {
	p.last, p.failures, p.notUp = err, p.failures+1, p.notUp+1
	if errors.Is(err, ErrPermanent) {
		p.permanent = err
	}
}

// succeeded is called when a launch produced a ready plugin: the next one,
// if it comes, need not wait.
func (p *pacer) succeeded() { p.failures, p.bo, p.last = 0, nil, nil }

// stop makes err, an error matching [ErrPermanent], the answer to every later launch.
func (p *pacer) stop(err error) { p.permanent = err }

// admit counts a launch of generation n, or a spare's promotion (which
// replaces a plugin as a launch does, without launching), towards the
// breaker, or returns the error that refuses it and whether this call
// opened the breaker.
func (p *pacer) admit(o options, now time.Time, cause error, n uint64) (opened bool, err error) {
	if p.permanent != nil {
		return false, p.permanent
	}
	if !p.openUntil.IsZero() {
		if now.Before(p.openUntil) {
			return false, p.crashLoop(cause)
		}
		// Half-open: one launch, at once; one more that serves nothing
		// reopens. The window restarts now, or a cool-down longer than
		// the window would forget the run and allow a full one again.
		p.openUntil = time.Time{}
		p.launches = o.maxLaunches - 1
		p.notUp = min(p.notUp, p.launches)
		p.failures, p.bo = 0, nil
		p.first = now
	}
	if p.launches > 0 && p.failures == 0 && now.Sub(p.first) > o.window {
		p.launches, p.notUp = 0, 0
	}
	if p.launches >= o.maxLaunches {
		p.openUntil = now.Add(o.coolDown)
		p.open = true
		return true, p.crashLoop(cause)
	}
	if p.launches == 0 {
		p.first = now
	}
	p.launches++
	p.newest = n
	return false, nil
}

// forget takes back the last admitted launch, a spare's promotion that
// is not to be counted after all.
func (p *pacer) forget() { p.launches = max(p.launches-1, 0) }

// delay returns how long an admitted launch must wait: the backoff after a
// failed launch, and for a token of the rate bound. A backoff that returns
// backoff.Stop gives up: delay returns the permanent failure that stops
// launches until reset.
func (p *pacer) delay(o options, now time.Time) (time.Duration, error) {
	var delay time.Duration
	if p.failures > 0 {
		d := nextBackOff(&p.bo, o)
		if d == backoff.Stop {
			p.permanent = Permanent(fmt.Errorf("redial: the backoff gave up (backoff.Stop) after %d failed launches in a row; last: %w", p.failures, p.last))
			return 0, p.permanent
		}
		delay = max(d, 0)
	}
	return max(delay, p.bucket.take(o.launchRate, o.launchBurst, now)), nil
}

// nextBackOff returns the next delay of the run's backoff *bo, made by
// Pacing.BackOff at the first failure of a run (*bo nil). It runs
// user code under Conn.mu: a func that returns nil, or a BackOff that
// panics, gets the default backoff instead (a panic is logged).
func nextBackOff(bo *backoff.BackOff, o options) (d time.Duration) {
	defer func() {
		if r := recover(); r != nil {
			slog.Error("redial: the Pacing.BackOff backoff panicked; using the default backoff", "panic", r)
			*bo = defaultBackOff()
			d = (*bo).NextBackOff()
		}
	}()
	if *bo == nil {
		if *bo = o.backoff(); *bo == nil {
			*bo = defaultBackOff()
		}
	}
	return (*bo).NextBackOff()
}

func (p *pacer) crashLoop(cause error) error {
	last := p.last
	if last == nil {
		last = cause
	}
	return &CrashLoopError{Launches: p.launches, Failed: p.notUp, Until: p.openUntil, Last: last}
}

// tokenBucket bounds the launch rate: it holds up to burst tokens and gains
// rate of them per second. The zero value is full.
type tokenBucket struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date; zero: full
}

// take takes a token at now and returns how long to wait until it is
// really there (tokens may go negative: later launches queue behind).
func (b *tokenBucket) take(rate float64, burst int, now time.Time) time.Duration {
	switch {
	case b.at.IsZero():
		b.tokens, b.at = float64(burst), now
	case now.After(b.at):
		b.tokens = min(float64(burst), b.tokens+now.Sub(b.at).Seconds()*rate)
		b.at = now
	}
	b.tokens--
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / rate * float64(time.Second))
}

// planned returns how long a planned launch (a rotation or a spare) must
// wait for a token of the rate bound, or the error that refuses it: a
// permanent failure, or the crash-loop breaker while it is open or
// half-open. A planned launch does not count towards the breaker, since the
// plugin it is for is alive and serving.
func (p *pacer) planned(o options, now time.Time) (time.Duration, error) {
	if err := p.refusePlanned(); err != nil {
		return 0, err
	}
	return p.bucket.take(o.launchRate, o.launchBurst, now), nil
}

// refusePlanned returns the error that refuses a planned launch or a
// rotation onto a spare, nil if none does.
func (p *pacer) refusePlanned() error {
	switch {
	case p.permanent != nil:
		return p.permanent
	case p.open:
		return p.crashLoop(nil)
	}
	return nil
}
