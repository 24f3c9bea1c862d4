package interceptor

import (
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/internal/ownrpc"
)

// Option configures a [Policy]; pass them to [New].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// options holds what the Option constructors set. Its zero value means
// every default (see the Policy methods that read it), so a zero [Policy]
// works.
type options struct {
	maxAttempts int // 0: defaultMaxAttempts
	methods     map[string]bool
	idempotency func(method string, req any) (idempotent, known bool)
	passthrough func(method string) bool // besides instanceMethod; nil: none
	bound       func(method string) bool // nil: none
	callIDs     bool
	ledger      bool
	replay      int // bytes; 0: defaultReplayBuffer
	resume      map[string]func(req, last any) (any, bool)
	evidence    time.Duration // 0: defaultEvidenceWait; <0: none
}

const (
	defaultMaxAttempts  = 4
	defaultEvidenceWait = 100 * time.Millisecond
	defaultReplayBuffer = 256 << 10 // grpc-go's own retry buffer per call
)

func defaultBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 10 * time.Millisecond
	b.MaxInterval = time.Second
	b.MaxElapsedTime = 0 // attempts and the caller's deadline bound the retries
	b.Reset()            // NewExponentialBackOff started from its own 500ms
	return b
}

// Limits bounds how hard one call tries to survive its plugin's death.
// Every field's zero value keeps the default (or the value a former
// [WithLimits] set).
type Limits struct {
	// MaxAttempts bounds the attempts of one call, the first included, so 1
	// never retries (a call that finds its plugin dead still has it respawned,
	// for the next call). The caller's deadline bounds them too. Default 4; zero
	// or negative means the default.
	MaxAttempts int
	// EvidenceWait bounds how long a failed call waits for evidence that
	// its plugin died — its process exiting, its connection leaving READY —
	// when the failure has the text of one of grpc-go's connection errors. A
	// real death shows within milliseconds; a plugin's handler that returns
	// such a text from its own gRPC client lives on, and its error is returned
	// as it is once the wait is over. Only such failures wait. A process whose
	// death the kernel already has under way (redial.Process.Await: a
	// zombie, a SIGKILL pending) is dead at once, however late the host's own
	// goroutines bring its exit and its connection's loss. Default 100ms;
	// zero means the default; negative means do not wait (then a death that
	// shows late is taken for the plugin's own error, and the plugin is still
	// replaced when its process exits).
	EvidenceWait time.Duration
	// ReplayBuffer bounds, in bytes, the memory that a client-streaming or
	// bidirectional call holds of the messages it sent, to send them again
	// to a new plugin if its plugin dies before the call commits (a
	// response header or message arrives). It keeps their bytes, as
	// encoded once for the first attempt, and 8 bytes a message to find
	// them; what it has allocated counts, so that empty messages fill it
	// too. A call that sends more commits then: a death after that ends it.
	// It bounds as well what a SendMsg that finds the stream ended keeps
	// of the messages received, for RecvMsg: their bytes, and 24 bytes a
	// message; past that, the stream's end is judged on evidence (see the
	// package documentation, "Streams"). Default 256 KiB, as grpc-go's
	// retry buffer; zero or negative means the default.
	ReplayBuffer int
}

// WithLimits sets the fields of l that are not zero; see [Limits].
func WithLimits(l Limits) Option {
	return optionFunc(func(o *options) {
		if l.MaxAttempts > 0 {
			o.maxAttempts = l.MaxAttempts
		}
		if l.EvidenceWait != 0 {
			o.evidence = l.EvidenceWait
		}
		if l.ReplayBuffer > 0 {
			o.replay = l.ReplayBuffer
		}
	})
}

// WithIdempotentMethods declares full method names ("/pkg.Service/Method")
// safe to run twice. It overrides the proto option idempotency_level.
func WithIdempotentMethods(methods ...string) Option {
	return optionFunc(func(o *options) {
		if o.methods == nil {
			o.methods = make(map[string]bool)
		}
		for _, m := range methods {
			o.methods[m] = true
		}
	})
}

// WithIdempotencyFunc decides idempotency by method and request. It is
// called, unless [WithIdempotentMethods] decided first:
//   - for a unary call or a server stream, only once the call has failed
//     on a connection fault (its plugin died, its connection broke) after
//     it may have reached the plugin, while the caller's ctx is live; req
//     is the unary call's request or the server stream's request;
//   - for a client-streaming or bidirectional stream, every time one is
//     opened, before anything is sent, with req nil: the stream must know
//     at once whether to keep what it sends for a replay.
//   - with [WithLedger], also before every unary call, to know whether to
//     keep it in the plugins' ledgers.
//
// known false defers to the proto option idempotency_level. It is how a
// host whose go-plugin stubs cannot pass call options decides per call: a Put of a whole object may be idempotent where an
// append is not. It must be safe for concurrent use, cheap (it runs on
// every stream open), and must not change req.
func WithIdempotencyFunc(f func(method string, req any) (idempotent, known bool)) Option {
	return optionFunc(func(o *options) { o.idempotency = f })
}

// WithPassthrough names methods, besides go-plugin's own services and
// grpc.health.v1 (which always go where they were sent, untouched), that
// respawn never retries and never takes as a sign that the plugin died:
// their errors are returned as they are. They are still sent to the
// current plugin when made on a connection redial has retired, as by a
// stub bound to the first plugin: excluding a method from retries does not
// strand it on a dead connection. Given more than once, the sets add up;
// nil adds nothing. f must be safe for concurrent use.
func WithPassthrough(f func(method string) bool) Option {
	return optionFunc(func(o *options) {
		if f == nil {
			return
		}
		if prev := o.passthrough; prev != nil {
			o.passthrough = func(m string) bool { return prev(m) || f(m) }
			return
		}
		o.passthrough = f
	})
}

// WithResume lets a server-streaming method survive its plugin's death
// after the caller has received messages, as etcd's watch resumes from a
// revision: next is given the call's request and the last message the
// caller received, and returns the request that continues the stream on
// the new plugin, so that the caller sees neither a gap nor a repeat. With
// ok false the stream ends with its error, as without WithResume. Each
// continuation has the attempts of a call of its own ([Limits].MaxAttempts),
// and the death of a plugin that had delivered messages is not held
// against the request ([ErrPoisonRequest]); a stream that cannot be
// continued ends with [ErrStreamBroken]. A method
// with a resume function is taken as safe to re-open. next must be safe for
// concurrent use and must change neither message. Req and Resp are the
// method's generated message types, such as *pb.WatchRequest and
// *pb.WatchResponse; a call whose messages are of other types is not
// resumed.
func WithResume[Req, Resp any](method string, next func(req Req, last Resp) (Req, bool)) Option {
	return optionFunc(func(o *options) {
		if o.resume == nil {
			o.resume = make(map[string]func(req, last any) (any, bool))
		}
		o.resume[method] = func(req, last any) (any, bool) {
			r, ok1 := req.(Req)
			l, ok2 := last.(Resp)
			if !ok1 || !ok2 {
				return nil, false
			}
			return next(r, l)
		}
	})
}

// WithBoundMethods names methods whose calls belong to the plugin instance
// they were made on, because their requests carry something only that
// instance knows: a hashicorp/go-plugin GRPCBroker id, a handle it gave
// out. They are never sent to another plugin: a call made on a connection
// redial retired, or on a plugin known to be dead, fails at once with
// [redial.ErrPluginGone] (never sent; codes.Unavailable), and a death under
// one is not retried: it fails with redial.ErrPluginGone if the method is
// idempotent or the call never reached the plugin, with [ErrOutcomeUnknown]
// otherwise. The plugin is respawned all the same; dispense the stub again
// from the successor (goplugin.DispenseEach does it). A call cut by a live
// plugin draining its connection (GOAWAY) fails with the cut's error, or with
// ErrOutcomeUnknown as above: the stub still reaches that plugin. Given more than once,
// the sets add up. f must be safe for concurrent use.
func WithBoundMethods(f func(method string) bool) Option {
	return optionFunc(func(o *options) {
		if f == nil {
			return
		}
		if prev := o.bound; prev != nil {
			o.bound = func(m string) bool { return prev(m) || f(m) }
			return
		}
		o.bound = f
	})
}

// WithCallIDs makes every call carry, in its outgoing metadata, a call id
// ([CallIDKey]) that all its attempts share, so that a plugin can tell a
// replay of a call it has already run. A call that already carries one
// keeps it. It costs four allocations per call (grpc-go's, adding it to
// the outgoing metadata), which is why it is off by default; retries
// always carry "x-retry-attempt", the attempt count ("1" on the first
// retry), as go-grpc-middleware's retry sends it.
func WithCallIDs() Option {
	return optionFunc(func(o *options) { o.callIDs = true })
}

// WithLedger makes a unary call or a client stream (an upload) that is not
// idempotent survive its plugin's death exactly once, where the plugins
// keep a ledger (package ledger: its ServerOptions in the plugin): such a
// call carries a call id
// ([CallIDKey]); if its plugin dies with it in flight, and both the dead
// plugin and its successor keep a ledger, it is sent to the successor with
// the same id, whose ledger answers from the dead plugin's record:
//   - the call had completed: its recorded response and status, without
//     running it again ([ErrResponseLost] if the response was too large to
//     keep);
//   - it had not started: it runs now;
//   - it was in its handler: [ErrOutcomeUnknown], "interrupted in its
//     handler", unless the plugin has a resolver for the method that can
//     tell from its own state.
//
// A plugin keeps a ledger if it made the ledger file its launch was given;
// redial checks that when it matters, never assumes it. Where one of the
// two does not, and for server and bidirectional streams, the call fails
// with ErrOutcomeUnknown as without WithLedger. A client stream keeps the
// bytes it sends (up to [Limits].ReplayBuffer), its first message, and a
// CRC-32C and length of all of it: it is re-opened with its id, sending
// all again, or only its first message if the rest was not kept, and
// is answered from the record (at any size), the method's stream resolver,
// or a run from the bytes sent again; otherwise [ErrOutcomeUnknown] says
// why (see docs/ledger.md). The Conn keeps the ledgers in a directory of its own
// (mode 0700), passes each launch its file in its environment, and removes
// a dead plugin's file once no call that was in flight on it can be
// retried, and all of them at Close. The cost on the host is the call id
// and two atomic adds per such call; WithIdempotencyFunc is then asked
// before every unary call, to know which calls to keep. See package
// ledger for what a plugin adds and what it guarantees.
func WithLedger() Option {
	return optionFunc(func(o *options) { o.ledger = true })
}

// instanceMethod reports whether method belongs to one plugin instance
// rather than to the service a plugin provides: the methods hashicorp/go-plugin
// sends on its own (its broker, controller and stdio services) and
// grpc.health.v1, which a health checker sends to one particular process.
// A Shutdown meant for a dead plugin must not reach its successor, a health
// check must report on the process it was meant for, and killing an old
// client must never wait on a respawn: these go where they were sent,
// untouched, never rerouted, retried or taken as signs of death, whatever
// [WithPassthrough] adds. It is safe for concurrent use.
func instanceMethod(method string) bool {
	// Every call rerouted from a retired connection asks this: look at one
	// byte before comparing prefixes.
	if len(method) < 2 {
		return false
	}
	switch method[1] {
	case 'p':
		return ownrpc.GoPlugin(method)
	case 'g':
		return strings.HasPrefix(method, "/grpc.health.v1.Health/")
	}
	return false
}

// idempotentOption is a per-call option that says whether this call may
// run twice. It overrides every other source; if given more than once, the
// last wins. The stream interceptor gives it to a resumed stream.
type idempotentOption struct {
	grpc.EmptyCallOption
	ok bool
}
