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
// the launch-rate bound ([WithLaunchRate]) and waiting for it; they do not
// count towards the crash-loop breaker, but none is launched while it is
// open, nor after a permanent failure, and a promotion counts as a launch
// for it, so a plugin that dies on every call still opens it; but not a
// promoted spare SIGKILLed from outside before it served a call, which a
// mass kill reached after its check: that is no failed launch (nor, on
// Linux, a death the calls in it caused: see [Exit.SelfInflicted]). A spare
// whose launch fails is launched again after the backoff ([WithBackOff],
// its own run of it), without counting towards the breaker; after a
// permanent failure, or 5 failures in a row, spares are launched again
// only once a plugin comes up, or after [Conn.Reset]. A spare that dies
// before it is needed is discarded and replaced, also one found dying at
// the moment it would be promoted, as in a mass kill that takes the spares
// with the plugins: one whose process has exited, or on Linux is a zombie
// or has a SIGKILL pending (read from /proc/<pid>/status, without a round
// trip to it); a launch replaces the plugin instead. Spares are stopped by
// [Conn.Close]. Events [EventStandbyTaken], [EventStandbyMissing] and
// [EventStandbyWasted] and the Spares fields of [Stats] count them.
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

// WithRecycle replaces the plugin by a planned replacement ([Conn.Rotate]),
// so that no call fails, once calls calls have been sent to it, once it is
// older than age, or once its resident memory exceeds rss bytes, whichever
// comes first; zero disables each. A plugin that leaks is thus replaced
// before the OOM killer kills it in the middle of a call.
//
// Calls are those sent through the Conn, its Invoke and NewStream (see
// [Generation.Calls]); calls on stubs bound to the hook's own connection,
// such as go-plugin stubs dispensed once, do not pass there and are not
// counted: use age or rss for those. Counting costs one atomic add per
// call, only when calls is set. The rotation starts as the limit is
// reached, from the call that reaches it, without making that call wait.
//
// Age and memory are checked every check interval (default 1s, when zero
// or negative) by one goroutine per Conn, started with the first plugin.
// Memory is the VmRSS of the plugin's process (the leader of its group,
// not its children) from /proc/<pid>/status, read only while the process
// is known to be running; it is Linux only: elsewhere the rss limit is
// ignored. A rotation the breaker refuses is tried again at the next
// check. The rotation is an [EventRotate] whose Err is a [*RecycleError].
// Default: no recycling.
func WithRecycle(calls uint64, age time.Duration, rss uint64, check time.Duration) Option {
	return optionFunc(func(o *options) {
		if check <= 0 {
			check = time.Second
		}
		o.recycle = recyclePolicy{calls: calls, age: max(age, 0), rss: rss, every: check}
	})
}
