package redial

import "time"

// WithStandby keeps n spare plugins ready ahead of need: launched through
// the hook, dialled, READY and health-checked (a plugin that does not serve
// grpc.health.v1 counts as alive; one that answers NOT_SERVING is not
// ready). When the current plugin must be replaced — its death, a hang, a
// [Conn.Rotate] — a spare becomes the new generation with an atomic swap,
// so no launch is on the critical path (a planned replacement checks the
// spare's health first, see [Conn.Rotate]), and a new spare is launched in
// the background, behind the recovery: spare launches (CPU-bound) wait until
// no respawn of any Conn in the process has run for 20ms, and at most 1s,
// so that after a mass kill they do not compete with the promotions and
// retried calls. Default 0: no spares. Negative means 0.
//
// Spares are launched once the first plugin is up, each taking a token of
// the launch-rate bound (Pacing.LaunchRate) and waiting for it; they do not
// count towards the crash-loop breaker, but none is launched while it is
// open, nor after a permanent failure, and a promotion counts as a launch
// for it, so a plugin that dies on every call still opens it; but not a
// promoted spare SIGKILLed from outside before it served a call, which a
// mass kill reached after its check: that is no failed launch (nor, on
// Linux, a death the calls in it caused: see [Exit.SelfInflicted]). A spare
// whose launch fails is launched again after the backoff (Pacing.BackOff,
// its own run of it), without counting towards the breaker; after a
// permanent failure, or 5 failures in a row, spares are launched again
// only once a plugin comes up, or after [Conn.Reset]. A spare that dies
// before it is needed is discarded and replaced, also one found dying at
// the moment it would be promoted, as in a mass kill that takes the spares
// with the plugins: one whose process has exited, or on Linux is a zombie
// or has a SIGKILL pending (read from /proc/<pid>/status, without a round
// trip to it); a launch replaces the plugin instead. Spares are stopped by
// [Conn.Close]. [EventStandby] reports a spare ready or discarded, an
// [EventRespawnDone] with Spare set one promoted, and the Spares fields of
// [Stats] count them.
//
// A spare's launch gets a [Request] with Spare set and Generation 0: its
// number is given when it is promoted. A hook that must replay host state
// into the plugin at promotion rather than at launch sets the spare's
// [Backend.Promote]. Each spare is a whole plugin process: its memory, and in the
// host a connection: about 20–25 KiB of heap and six goroutines, five of
// them grpc-go's (with package command's Hook on Linux; elsewhere two more).
func WithStandby(n int) Option {
	return optionFunc(func(o *options) { o.standby = max(n, 0) })
}

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
