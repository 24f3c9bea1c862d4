package health

import "time"

// Config configures a watcher; pass it to [Watch]. The zero Config is
// the defaults: every field documents what its zero value means. A Config
// is a plain value, read once by Watch.
type Config struct {
	// Off turns the watch off: a plugin is then replaced when its process
	// exits or a call finds it dead, and a hung one (stopped, deadlocked)
	// is never replaced. Watch then does nothing.
	Off bool

	// Service is the service name sent in each grpc.health.v1 Check.
	// Zero: "", the server's overall health, which grpc-go's health
	// server and hashicorp/go-plugin both report SERVING. Any answer
	// counts as alive, so the name only matters to what a plugin reports
	// per service.
	Service string

	// Interval is how often the plugin is probed. On Linux a stopped
	// plugin (SIGSTOP) is found hung at its first failed round, at most
	// Interval + Timeout after it stopped (2s with the defaults); any
	// other plugin that stops answering and shows no sign of life, at
	// most Interval + Failures × max(Interval, Timeout) later (4s).
	// Zero or negative: 1s.
	Interval time.Duration

	// Timeout is the length of a round: a plugin that has not answered a
	// check within it failed the round. The check stays open, and an
	// answer that comes in a later round still counts. On Linux a failed
	// round of a plugin whose serving process is runnable or used CPU
	// time in it is not counted towards Failures: the plugin is slow, not
	// hung; nor is one the host itself woke more than Timeout/10 late
	// for. Elsewhere the watcher cannot tell, so keep the timeout above
	// the plugin's worst answer time under load. Zero or negative: 1s.
	Timeout time.Duration

	// Failures is how many rounds in a row must fail, with no sign of
	// life from the process, before the plugin is declared hung and
	// killed. One late answer is not a hang. A stopped process needs
	// one; a process that keeps running but never answers is hung after
	// 10 × Failures failed rounds. Zero or negative: 3.
	Failures int

	// onCheck, if not nil, receives the outcome of every health check,
	// after the watcher has acted on it: when it sees a failed check, any
	// respawn that led to has already been asked for. It is called
	// synchronously from the watcher's goroutines, possibly from two at
	// once. Tests set it.
	onCheck func(check)
}

// withDefaults returns cfg with each zero or negative field set to its
// default.
func (cfg Config) withDefaults() Config {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Second
	}
	if cfg.Failures <= 0 {
		cfg.Failures = 3
	}
	return cfg
}
