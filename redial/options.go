package redial

import (
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Option configures a [Conn]; pass them to [New].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// A Policy binds call-level middleware to a Conn: it returns the dial options
// (interceptors) that every connection of that Conn carries. interceptor.New
// returns one.
type Policy interface {
	DialOptions(c *Conn) []grpc.DialOption
}

// PolicyFunc adapts an ordinary function to a [Policy].
type PolicyFunc func(c *Conn) []grpc.DialOption

// DialOptions calls f(c).
func (f PolicyFunc) DialOptions(c *Conn) []grpc.DialOption { return f(c) }

var _ Policy = PolicyFunc(nil)

type options struct {
	dial           []grpc.DialOption
	policy         Policy
	respawnTimeout time.Duration
	grace          time.Duration
	maxLaunches    int
	window         time.Duration
	coolDown       time.Duration
	backoff        func() backoff.BackOff
	onEvent        func(Event)
	now            func() time.Time
}

func defaultOptions() options {
	return options{
		respawnTimeout: 30 * time.Second,
		grace:          2 * time.Second,
		maxLaunches:    5,
		window:         time.Minute,
		coolDown:       30 * time.Second,
		backoff:        defaultBackOff,
		now:            time.Now,
	}
}

func defaultBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	b.RandomizationFactor = 0.5
	b.Multiplier = 2
	b.MaxInterval = 5 * time.Second
	b.MaxElapsedTime = 0 // the breaker, not the backoff, gives up
	b.Reset()            // NewExponentialBackOff started from its own 500ms
	return b
}

// WithDialOptions adds dial options used when redial dials a Target returned
// by the hook. They come after the default insecure transport credentials (a
// plugin is a local child on a private socket), so credentials given here
// replace them. Give the same credentials every time: a respawned plugin is
// never reached with weaker ones.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return optionFunc(func(o *options) { o.dial = append(o.dial, opts...) })
}

// WithPolicy installs call-level middleware, usually interceptor.New(...),
// on every connection of the Conn. Default: none, so a failed call is not
// retried and a dead plugin is only replaced when something asks.
func WithPolicy(p Policy) Option {
	return optionFunc(func(o *options) { o.policy = p })
}

// WithRespawnTimeout bounds one respawn: the hook, the dial and the wait for
// the new plugin to be ready. Default 30s; zero or negative means the default.
func WithRespawnTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d > 0 {
			o.respawnTimeout = d
		}
	})
}

// WithGracePeriod is how long a replaced connection stays open for calls
// still in flight on a live process. It ends early when the process exits.
// Default 2s; zero means close at once; negative means the default.
func WithGracePeriod(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d >= 0 {
			o.grace = d
		}
	})
}

// WithCrashLoop sets the breaker: after launches respawns in a row, within
// window, that produced no plugin able to serve a call, calls fail fast with
// a [CrashLoopError] for coolDown, then one respawn is tried again. Defaults:
// 5, 1 minute, 30 seconds; a zero or negative value keeps its default.
func WithCrashLoop(launches int, window, coolDown time.Duration) Option {
	return optionFunc(func(o *options) {
		if launches > 0 {
			o.maxLaunches = launches
		}
		if window > 0 {
			o.window = window
		}
		if coolDown > 0 {
			o.coolDown = coolDown
		}
	})
}

// WithBackOff sets the delay before a respawn that follows a failed one (the
// hook erred, or the new plugin never became ready); a respawn after a
// plugin that came up runs at once, and the breaker of [WithCrashLoop] bounds
// plugins that come up and die. newBackOff is called for each run of
// failures, since a BackOff is not safe for concurrent use. Default:
// exponential from 50ms, factor 2, jitter 0.5, capped at 5s. nil means the
// default.
func WithBackOff(newBackOff func() backoff.BackOff) Option {
	return optionFunc(func(o *options) {
		if newBackOff != nil {
			o.backoff = newBackOff
		}
	})
}

// WithEventHandler receives every [Event]. It is called synchronously on the
// goroutine where the event happens, so it must be quick and must not call
// back into the Conn in a way that waits for a respawn. Default: none.
func WithEventHandler(f func(Event)) Option {
	return optionFunc(func(o *options) { o.onEvent = f })
}

// WithClock replaces time.Now, for tests that must not sleep. Default time.Now.
func WithClock(now func() time.Time) Option {
	return optionFunc(func(o *options) {
		if now != nil {
			o.now = now
		}
	})
}

// dialOptions are those redial dials a Target with: insecure by default,
// then the user's, then the policy's bound to c.
func (o *options) dialOptions(policy []grpc.DialOption) []grpc.DialOption {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	opts = append(opts, o.dial...)
	return append(opts, policy...)
}

func (o *options) policyOptions(c *Conn) []grpc.DialOption {
	if o.policy == nil {
		return nil
	}
	return o.policy.DialOptions(c)
}
