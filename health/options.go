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
		interval: time.Second,
		timeout:  time.Second,
		failures: 3,
	}
}

// WithInterval sets how often the plugin is probed. On Linux a stopped
// plugin (SIGSTOP) is found hung at its first failed check, at most
// interval + timeout after it stopped (2s with the defaults); any other
// plugin that stops answering and shows no sign of life, at most interval
// + failures × max(interval, timeout) later (4s). Default 1s; zero or
// negative means the default.
func WithInterval(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d > 0 {
			o.interval = d
		}
	})
}

// WithTimeout bounds one health check; a plugin that has not answered by
// then failed it. On Linux a failed check of a plugin whose process is
// runnable or used CPU time during the check is not counted towards
// [WithFailures]: the plugin is slow, not hung. Elsewhere the Watcher
// cannot tell, so keep the timeout above the plugin's worst answer time
// under load. Default 1s; zero or negative means the default.
func WithTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d > 0 {
			o.timeout = d
		}
	})
}

// WithFailures sets how many checks in a row must fail, with no sign of
// life from the process, before the plugin is declared hung and killed. One
// late answer is not a hang. A stopped process needs one; a process that
// keeps running but never answers is hung after 10 × n failed checks.
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
