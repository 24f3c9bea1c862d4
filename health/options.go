package health

import "time"

// Option configures a [Watcher]; pass them to [Watch].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	interval time.Duration
	timeout  time.Duration
	failures int
	service  string
	onCheck  func(Check)
}

func defaultOptions() options {
	return options{
		interval: 5 * time.Second,
		timeout:  time.Second,
		failures: 3,
	}
}

// WithInterval sets how often the plugin is probed. A plugin that stops
// answering is found hung at most interval + failures × max(interval,
// timeout) later. Default 5s; zero or negative means the default.
func WithInterval(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d > 0 {
			o.interval = d
		}
	})
}

// WithTimeout bounds one health check; a plugin that has not answered by
// then failed it. Keep it well above the plugin's worst answer time under
// load, since a busy plugin that answers late is killed all the same.
// Default 1s; zero or negative means the default.
func WithTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d > 0 {
			o.timeout = d
		}
	})
}

// WithFailures sets how many checks in a row must fail before the plugin is
// declared hung and killed. One late answer is not a hang.
// Default 3; zero or negative means the default.
func WithFailures(n int) Option {
	return optionFunc(func(o *options) {
		if n > 0 {
			o.failures = n
		}
	})
}

// WithService sets the service name sent in each grpc.health.v1 Check.
// Default "", the server's overall health, which grpc-go's health server
// and hashicorp/go-plugin both report SERVING. Any answer counts as alive,
// so the name only matters to a [WithCheckHandler] that looks at statuses.
func WithService(name string) Option {
	return optionFunc(func(o *options) { o.service = name })
}

// WithCheckHandler receives the outcome of every health check, after the
// Watcher has acted on it: when f sees a failed check, any respawn it led to
// has already been asked for. f is called synchronously from the Watcher's
// goroutines, possibly from two at once, so it must be quick and safe for
// concurrent use. Use it for metrics and logs. Default: none.
func WithCheckHandler(f func(Check)) Option {
	return optionFunc(func(o *options) { o.onCheck = f })
}
