package redial

import (
	"time"

	"github.com/cenkalti/backoff/v4"
)

// pacer decides when the next respawn may run. A respawn runs at once unless
// the previous one failed (the hook erred or the plugin never became ready):
// failed respawns in a row back off. Respawns in a row that yield no plugin
// able to serve a call, failed or not, open the breaker. Guarded by Conn.mu.
type pacer struct {
	launches  int       // respawns since a plugin last served a call
	failures  int       // failed respawns in a row
	first     time.Time // when the first of them started
	openUntil time.Time // breaker open until then; zero when closed or half-open
	open      bool      // open or half-open: no plugin has served a call since it opened
	last      error
	bo        backoff.BackOff
}

func (p *pacer) reset() {
	*p = pacer{}
}

// served is called when the current plugin served a call. It reports
// whether that closed the breaker.
func (p *pacer) served() (closed bool) {
	closed = p.open
	p.launches, p.failures, p.bo, p.last = 0, 0, nil, nil
	p.open, p.openUntil = false, time.Time{}
	return closed
}

func (p *pacer) failed(err error) { p.last, p.failures = err, p.failures+1 }

// succeeded is called when a respawn produced a ready plugin: the next one,
// if it comes, need not wait.
func (p *pacer) succeeded() { p.failures, p.bo = 0, nil }

// next returns how long the respawn must wait, or a *CrashLoopError and
// whether this call opened the breaker.
func (p *pacer) next(o options, now time.Time, cause error) (delay time.Duration, opened bool, err error) {
	if !p.openUntil.IsZero() {
		if now.Before(p.openUntil) {
			return 0, false, p.crashLoop(cause)
		}
		// Half-open: let one launch through; one more failure reopens. The
		// window restarts now, or a cool-down longer than the window would
		// forget the failures and allow a full run of launches.
		p.openUntil = time.Time{}
		p.launches = o.maxLaunches - 1
		p.first = now
	}
	if p.launches > 0 && now.Sub(p.first) > o.window {
		p.launches, p.failures, p.bo = 0, 0, nil
	}
	if p.launches >= o.maxLaunches {
		p.openUntil = now.Add(o.coolDown)
		p.open = true
		return 0, true, p.crashLoop(cause)
	}
	if p.launches == 0 {
		p.first = now
	}
	if p.failures > 0 {
		if p.bo == nil {
			p.bo = o.backoff()
		}
		if d := p.bo.NextBackOff(); d > 0 {
			delay = d
		}
	}
	p.launches++
	return delay, false, nil
}

func (p *pacer) crashLoop(cause error) error {
	last := p.last
	if last == nil {
		last = cause
	}
	return &CrashLoopError{Launches: p.launches, Until: p.openUntil, Last: last}
}
