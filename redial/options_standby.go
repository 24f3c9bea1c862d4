package redial

import "time"

// Recycle says when [WithRecycle] replaces a plugin. A zero limit is not
// applied.
type Recycle struct {
	// Calls: once this many calls have been sent to the plugin through the
	// Conn, its Invoke and NewStream. Calls on stubs bound to the hook's
	// own connection, such as go-plugin stubs dispensed once, do not pass
	// there and are not counted: use Age or RSS for those. Counting costs
	// one atomic add per call, only when Calls is set.
	Calls uint64
	// Age: once the plugin is older than this.
	Age time.Duration
	// RSS: once the resident memory of the plugin's process (the leader
	// of its group, not its children; VmRSS from /proc/<pid>/status)
	// exceeds this many bytes. Linux only: elsewhere it is ignored.
	RSS uint64
	// Check is how often Age and RSS are checked, by one goroutine per
	// Conn started with the first plugin. Zero or negative means 1s.
	Check time.Duration
}

// WithRecycle replaces the plugin by a planned replacement ([Conn.Rotate]),
// so that no call fails, once it reaches any limit of r, whichever comes
// first. A plugin that leaks is thus replaced before the OOM killer kills
// it in the middle of a call. The rotation starts as the limit is reached,
// from the call or check that finds it, without making a call wait; a
// rotation the breaker refuses is tried again at the next check. It is a
// respawn with Planned set, whose [EventRespawnStart] has as its Err an
// error that says which limit was reached. Default: no recycling.
func WithRecycle(r Recycle) Option {
	return optionFunc(func(o *options) {
		if r.Check <= 0 {
			r.Check = time.Second
		}
		o.recycle = recyclePolicy{calls: r.Calls, age: max(r.Age, 0), rss: r.RSS, every: r.Check}
	})
}
