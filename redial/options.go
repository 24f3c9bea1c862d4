package redial

import (
	"slices"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Option configures a [Conn]; pass them to [New].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// A Policy binds call-level middleware to a Conn. New calls Start once,
// with the [Handle] the policy acts through: there a policy starts what
// runs beside the calls (a health watch, on [Handle.Go]), and it returns
// the [Binding] that says what the Conn's connections carry and whether
// the Conn keeps ledgers. interceptor.New returns one.
type Policy interface {
	Start(h Handle) Binding
}

// Binding is what a [Policy] gives its Conn. The zero Binding installs
// nothing and keeps no ledgers.
type Binding struct {
	// DialOptions are the dial options (interceptors) every connection of
	// the Conn carries, after those of [WithDialOptions].
	DialOptions []grpc.DialOption
	// Defaults are dial options that the host's override: every connection
	// carries them before those of [WithDialOptions]. A default service
	// config goes there: the last one given replaces the others
	// wholesale, so that a host's own keeps working.
	Defaults []grpc.DialOption
	// Ledgers makes the Conn keep a ledger directory, for a policy that
	// retries calls through the plugins' ledgers (package ledger): a
	// directory of the host's, mode 0700, made at the first launch, in
	// which every launch is given a file, made empty, to keep its ledger
	// in, named in its environment (RESPAWN_LEDGER) with a key of its own
	// (RESPAWN_LEDGER_KEY); a directory that cannot be made fails the
	// launch. Each plugin's file is its [Generation.Ledger].
	Ledgers bool
}

type options struct {
	dial           []grpc.DialOption
	defaults       []grpc.DialOption // the policy's (Binding.Defaults)
	policy         Policy
	policies       int // WithPolicy given; more than one is an error
	respawnTimeout time.Duration
	grace          time.Duration
	maxLaunches    int
	window         time.Duration
	coolDown       time.Duration
	launchRate     float64 // launches per second, sustained
	launchBurst    int
	finalExits     []int // exit codes that mean "do not respawn"
	maxWait        time.Duration
	backoff        func() backoff.BackOff
	onEvent        func(Event)
	name           string
	now            func() time.Time
	standby        int           // spares kept ready (Pacing.Spares)
	recycle        recyclePolicy // when to rotate a plugin (Pacing.Recycle)
}

func defaultOptions() options {
	return options{
		respawnTimeout: 10 * time.Second,
		grace:          2 * time.Second,
		maxLaunches:    5,
		window:         time.Minute,
		coolDown:       30 * time.Second,
		launchRate:     10,
		launchBurst:    10,
		maxWait:        15 * time.Second,
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

// WithDialOptions adds dial options for every connection to a plugin. When
// redial dials a Target returned by the hook, they come after the default
// insecure transport credentials (a plugin is a local child on a private
// socket), so credentials given here replace them. Give the same credentials
// every time: a respawned plugin is never reached with weaker ones.
//
// A hook that dials the plugin itself (the go-plugin hook) gets them in
// [Request.DialOptions], followed by the policy's, without the default
// credentials: interceptors given here run for its calls too. It appends
// them after its own options, so credentials given here would replace the
// hook's (go-plugin's AutoMTLS): with such a hook, give none.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return optionFunc(func(o *options) { o.dial = append(o.dial, opts...) })
}

// WithPolicy installs call-level middleware, usually interceptor.New(...),
// on every connection of the Conn; it may be given once. The Policy routes
// and retries calls. Default: none, so a failed call is not retried; the
// Conn still routes a call made on a retired connection (a stub bound to
// it) to the current plugin, a plugin whose process exits is still
// replaced, and a call made once its exit is known waits for the successor
// (launching one if an earlier respawn failed). The root package's
// respawn.New installs respawn's policy.
func WithPolicy(p Policy) Option {
	return optionFunc(func(o *options) { o.policy = p; o.policies++ })
}

// Pacing says how fast and how often a Conn replaces plugins, and when it
// stops. Every field's zero value keeps the default (or the value a former
// [WithPacing] set), so a Pacing names only what it changes.
type Pacing struct {
	// Spares is how many spare plugins the Conn keeps ready ahead of need: launched through
	// the hook, dialled, READY and health-checked (a plugin that does not serve
	// grpc.health.v1 counts as alive; one that answers NOT_SERVING is not
	// ready). When the current plugin must be replaced — its death, a hang, a
	// [Conn.Rotate] — a spare becomes the new generation with an atomic swap,
	// so no launch is on the critical path (a planned replacement checks the
	// spare's health first, see [Conn.Rotate]), and a new spare is launched in
	// the background, behind the recovery: spare launches (CPU-bound) wait until
	// no respawn of any Conn in the process has run for 20ms, and at most 1s,
	// so that after a mass kill they do not compete with the promotions and
	// retried calls; a respawn runs until its plugin has served a call (at
	// most 100ms after it became current). Default 0: no spares.
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
	Spares int
	// GracePeriod is how long a replaced plugin's connection stays open for
	// the calls still in flight on its live process. It ends early when
	// the process exits. Default 2s; negative means close at once.
	GracePeriod time.Duration
	// RespawnTimeout bounds one respawn: the hook, the dial and the wait
	// for the new plugin to be ready. A respawn cut short fails with an
	// error that matches [ErrRespawnTimeout] (not
	// context.DeadlineExceeded) and counts towards the breaker like any
	// failed launch. Default 10s.
	RespawnTimeout time.Duration
	// MaxWait bounds how long a call whose ctx has no deadline waits for a
	// plugin (the first launch, or a respawn) before it fails with an
	// error that matches [ErrNoPlugin] (codes.Unavailable). A call with a
	// deadline waits until its deadline. Default 15s: a respawn timeout
	// plus the longest default backoff, so a call without a deadline sees
	// the respawn's own outcome.
	MaxWait time.Duration
	// LaunchRate and LaunchBurst bound the sustained launch rate whatever
	// the plugin does: a launch takes a token from a bucket of LaunchBurst
	// tokens that refills at LaunchRate per second; without a token, the
	// launch waits for one. Default 10 per second with a burst of 10, so a
	// plugin killed every 200ms is replaced at once while one that dies
	// right after each call cannot make the host fork more than 10
	// processes a second.
	LaunchRate  float64
	LaunchBurst int
	// The crash-loop breaker: after CrashLoopLaunches launches in a row
	// that produced no plugin able to serve a call, calls fail fast with
	// an error that matches [ErrCrashLoop] for CrashLoopCoolDown; then one
	// launch is tried at once, and if its plugin serves nothing either the
	// breaker opens again. A failed launch (hook error, respawn timeout,
	// plugin never ready) counts whatever it lasted; CrashLoopWindow only
	// forgets a run whose last launch came up. A plugin that serves a call
	// and then dies is not a crash loop: LaunchRate bounds it. Defaults: 5
	// launches, 1 minute, 30 seconds; with the default respawn timeout,
	// five hung starts open the breaker after about 51s.
	CrashLoopLaunches int
	CrashLoopWindow   time.Duration
	CrashLoopCoolDown time.Duration
	// FinalExitCodes lists exit codes that mean "do not respawn", like
	// systemd's RestartPreventExitStatus: once a plugin exits with one of
	// them (while starting or later), the Conn launches no more plugins
	// and calls fail at once with an error that matches [ErrPermanent]
	// until [Conn.Reset]. A plugin killed by a signal never matches.
	// Default: none.
	FinalExitCodes []int
	// Recycle replaces a plugin before it fails; see [Recycle]. Default:
	// no recycling.
	Recycle Recycle
	// BackOff makes the delay before a respawn that follows a failed one
	// (the hook erred, or the new plugin never became ready); a respawn
	// after a plugin that came up runs at once. It is called for each run
	// of failures, since a BackOff is not safe for concurrent use. A
	// BackOff whose NextBackOff returns backoff.Stop gives up: calls fail
	// at once with an error that matches [ErrPermanent] until
	// [Conn.Reset]. Default: exponential from 50ms, factor 2, jitter 0.5,
	// capped at 5s. A func that returns nil, or a BackOff that panics
	// (logged with log/slog), means the default.
	BackOff func() backoff.BackOff
}

// WithPacing sets the fields of p that are not zero; see [Pacing].
func WithPacing(p Pacing) Option {
	return optionFunc(func(o *options) {
		if p.Spares > 0 {
			o.standby = p.Spares
		}
		switch {
		case p.GracePeriod > 0:
			o.grace = p.GracePeriod
		case p.GracePeriod < 0:
			o.grace = 0
		}
		if p.RespawnTimeout > 0 {
			o.respawnTimeout = p.RespawnTimeout
		}
		if p.MaxWait > 0 {
			o.maxWait = p.MaxWait
		}
		if p.LaunchRate > 0 {
			o.launchRate = p.LaunchRate
		}
		if p.LaunchBurst > 0 {
			o.launchBurst = p.LaunchBurst
		}
		if p.CrashLoopLaunches > 0 {
			o.maxLaunches = p.CrashLoopLaunches
		}
		if p.CrashLoopWindow > 0 {
			o.window = p.CrashLoopWindow
		}
		if p.CrashLoopCoolDown > 0 {
			o.coolDown = p.CrashLoopCoolDown
		}
		if p.FinalExitCodes != nil {
			o.finalExits = append([]int(nil), p.FinalExitCodes...)
		}
		if p.BackOff != nil {
			o.backoff = p.BackOff
		}
		if p.Recycle != (Recycle{}) {
			r := p.Recycle
			if r.Check <= 0 {
				r.Check = time.Second
			}
			o.recycle = recyclePolicy{calls: r.Calls, age: max(r.Age, 0), rss: r.RSS, ledger: r.Ledger, every: r.Check}
		}
	})
}

// WithEventHandler receives every [Event]. Delivery is asynchronous and in
// order: emitting puts the event in a queue of 256 per Conn and returns;
// one goroutine, started when there is something to deliver and gone when
// the queue is empty, calls f with one event at a time. So a slow handler
// delays only later events, never a call, a respawn or [Conn.Close]; when
// the queue is full the newest events are dropped and counted in
// [Stats].DroppedEvents. A handler that panics is recovered: the panic is
// counted in [Stats].HandlerPanics and logged with log/slog, and delivery
// goes on. Close does not wait for f: the events queued before it and those
// it causes (the exits of the plugins it stops) are still given to f, in
// order, then an [EventClosed], the last; events emitted after that are
// counted in DroppedEvents and not delivered. f may call back into the
// Conn, Close included. Default: none.
func WithEventHandler(f func(Event)) Option {
	return optionFunc(func(o *options) { o.onEvent = f })
}

// WithName names the plugin the Conn runs, as in "objectstore", so that a
// host with several can tell which one an event, a log line, an error or a
// metric is about: events carry it in [Event.Plugin], and errors such as
// [ErrCrashLoop] quote it. Default: none.
func WithName(name string) Option {
	return optionFunc(func(o *options) { o.name = name })
}

// withClock replaces time.Now, for tests that must not sleep. It runs
// under the Conn's lock: a call that panics reads time.Now instead.
func withClock(now func() time.Time) Option {
	return optionFunc(func(o *options) {
		if now != nil {
			o.now = func() (t time.Time) {
				defer func() {
					if recover() != nil {
						t = time.Now()
					}
				}()
				return now()
			}
		}
	})
}

// dialOptions are those redial dials a Target with: insecure by default,
// then the policy's defaults, the user's, and the policy's bound to c.
func (o *options) dialOptions(policy []grpc.DialOption) []grpc.DialOption {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	return append(opts, o.hookDialOptions(policy)...)
}

// hookDialOptions are those a hook that dials itself gets
// ([Request.DialOptions]): the policy's defaults, the user's, then the
// policy's, and not redial's default credentials, as the hook's transport
// is its own.
func (o *options) hookDialOptions(policy []grpc.DialOption) []grpc.DialOption {
	return slices.Concat(o.defaults, o.dial, policy)
}

// start starts the policy, if any, on the Conn whose Handle h is.
func (o *options) start(h Handle) Binding {
	if o.policy == nil {
		return Binding{}
	}
	return o.policy.Start(h)
}

// Recycle says when a plugin is replaced by a planned replacement
// ([Conn.Rotate]), so that no call fails, once it reaches any of these
// limits, whichever comes first: a plugin that leaks is thus replaced
// before the OOM killer kills it in the middle of a call. The rotation
// starts as the limit is reached, from the call or check that finds it,
// without making a call wait; a rotation the breaker refuses is tried
// again at the next check. It is a respawn with Planned set, whose
// [EventRespawnStart] has as its Err an error that says which limit was
// reached. A zero limit is not applied; the zero Recycle recycles nothing.
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
	// Ledger: once the plugin's ledger file (package ledger, with a policy
	// that keeps ledgers: interceptor.WithLedger) exceeds this many bytes.
	// A plugin's ledger grows with every call it records, and is removed
	// once it is stopped and none of its calls can be retried: this bounds
	// what a long-lived plugin's ledger takes on disk, and what its
	// successor reads to answer a retry (some 10 ms for 16 MiB). Zero means
	// 16 MiB; negative means never. Without ledgers it is ignored. The
	// file's size is what counts: on Linux the plugin preallocates it 64
	// KiB at a time past its records, so it holds up to 64 KiB less than
	// the bound when it is replaced; a bound under 64 KiB counts as 64 KiB.
	Ledger int64
	// Check is how often Age, RSS and Ledger are checked, by one goroutine
	// per Conn started with the first plugin. Zero or negative means 1s.
	Check time.Duration
}
