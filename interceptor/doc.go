// Package interceptor is respawn's call policy: unary and stream client
// interceptors that notice a call failed because its plugin died, have
// package redial start a fresh plugin, and retry the call when that is safe.
//
// # What is retried
//
// Whether a plugin died is decided from evidence, gathered on the error path
// only: has the process of the generation the attempt went to exited, has
// its connection left READY or been closed, did the attempt reach a
// transport (grpc.Peer, on retries). A status from a live plugin on a live
// connection is the plugin's own, whatever its code and text: a plugin
// that proxies another gRPC server returns grpc-go's transport texts from a
// healthy process. A status that came in the plugin's trailers is its own
// at once: a stream's attempts and respawn's retries of a unary call read
// the trailer; a unary call's first attempt, which carries no option so
// that a successful call costs nothing, learns it from the load balancer of
// the Policy's default service config (a host's own default service config
// replaces it, and with it that shortcut); a SendMsg that finds its
// attempt ended reads it to its end, as RecvMsg would (see "Streams"). For
// any other, the evidence is waited for at most [Limits].EvidenceWait.
// Each failed attempt ends in one class:
//
//   - never sent: the plugin is dead and the attempt is known not to have
//     reached it (or the call found its plugin dead and was not sent).
//     Retried for any method, on a new plugin; but a live plugin that
//     drains its connection (GOAWAY: max connection age, too many pings) is
//     kept, and the call retried on it.
//   - maybe processed: the plugin died, or the transport closed, with the
//     call possibly in it. Retried only for idempotent methods. Any other
//     method fails with an error that matches [ErrOutcomeUnknown]
//     (codes.Unknown, so that retry layers outside do not run it again);
//     the plugin is respawned all the same, so the next
//     call works. A call under which two plugins died, of deaths it may
//     have caused (not a kill from another process: see
//     [redial.Exit.SelfInflicted]), fails with an error that matches
//     [ErrPoisonRequest]. A call cut by a live
//     plugin that drained its connection (a GOAWAY, then the close) is
//     in this class too, but the plugin is kept: it took a new connection
//     with its process alive. A read is retried on it.
//   - not a connection fault: everything else, including codes.Unavailable
//     returned by the plugin's own handler and the caller's own deadline.
//     Never retried, never respawns.
//
// Idempotency comes from, in order: [WithIdempotentMethods] and
// [WithIdempotencyFunc] (or [WithResume], for its method); the proto method option
// idempotency_level (NO_SIDE_EFFECTS or IDEMPOTENT). Unknown means not
// idempotent.
//
// Retries are bounded by [Limits].MaxAttempts and by the caller's deadline; they
// use grpc.WaitForReady(true) so an attempt waits for the new plugin to come
// up, and (except a client or bidirectional stream's) stop waiting if that
// plugin's process exits.
//
// # Streams
//
// A stream that respawn may re-open on a new plugin (a server stream
// before its first message, an idempotent client or bidirectional stream
// before it commits) stays one stream for its caller. A new attempt is sent
// the bytes the first was sent: each message is encoded once, with the
// call's codec, when SendMsg is called, so the caller may reuse it as soon
// as SendMsg returns. Its Context lives as
// long as the stream, not as one attempt: a replay does not end it, so a
// goroutine that stops on <-stream.Context().Done() stops when the stream
// ends, or the caller's ctx does. Unlike grpc-go's, taking it does not
// commit the stream. Header returns the header of the attempt that
// answers: an attempt whose plugin died before sending one is replaced, not
// reported as a stream without header. A verdict on a stream
// ([ErrOutcomeUnknown], [ErrStreamBroken], ...) is given once: every
// later call on the stream returns the same error.
//
// A stream commits — it is never re-opened again, and a death of its
// plugin ends it — at the first of these events that commits its kind:
//
//	event                               server   client   bidi
//	a response header                   no       yes      yes
//	a response message                  yes      yes      yes
//	the plugin's own end (its status)   yes      yes      yes
//	the caller takes its Context        no       no       no
//	the replay log is full              yes      yes      yes
//
// The replay log of a server stream holds its one request; a client or
// bidirectional stream's, what [Limits].ReplayBuffer allows. A client or
// bidirectional stream of a method that is not idempotent keeps no log: a
// death after it sent a message is an [ErrOutcomeUnknown]; with
// [WithLedger], a client stream keeps one, and is re-opened through the
// plugins' ledgers, whatever it received or could not keep (a header
// commits it not). A server stream that has received messages may still
// go on with [WithResume].
//
// A SendMsg that finds its attempt ended (io.EOF) learns why only from
// the status, which grpc-go gives after the messages the plugin sent: it
// reads the attempt to its end, keeps the messages as their bytes, and
// judges the status at once. The plugin's own end (a status in its
// trailers, or one the evidence does not show to be a death) commits the
// stream: SendMsg returns io.EOF, and RecvMsg then returns those
// messages, decoded with the call's codec, and that status, as grpc-go
// does. A death re-opens the stream, if it has not committed, and the
// messages of the dead attempt, which the caller never saw, are dropped.
// It keeps up to [Limits].ReplayBuffer of them, and one message more; the
// end of a stream whose plugin sent more is judged on evidence, which
// SendMsg waits for until RecvMsg reads a message. An interceptor chained
// after respawn's sees those messages received into a value of respawn's
// own, as their bytes.
//
// # Installing
//
// Pass a [Policy] to redial.WithPolicy (or use the root package's
// respawn.New) and every connection the Conn makes carries the
// interceptors. A hook that dials the plugin itself (the go-plugin hook)
// gets them in redial.Request.DialOptions and appends them to its own; to
// place them in a chain of your own, assemble them in a redial.Policy of
// your own, from the redial.Handle its Start is given, with the Binding of
// [Policy.Start] (which says whether the Conn keeps ledgers). The interceptors
// are chained (grpc.WithChainUnaryInterceptor), so they compose with the
// host's own; those given first run once per call, outside respawn's retries.
// [Policy.Start] also turns grpc-go's own retries off on the
// connection; a retry layer outside respawn should use [Retriable].
//
// Methods that belong to one plugin instance (those hashicorp/go-plugin
// sends on its own, and grpc.health.v1) pass through
// untouched. [WithPassthrough] adds methods that are never retried nor
// taken as a sign of death; unlike those, they are still routed from
// retired connections to the current plugin.
//
// # Cost
//
// A unary call that succeeds on the current plugin costs three loads and
// two comparisons, and allocates nothing more than grpc-go does. A stream
// allocates one object more: the stream that can be re-opened, which holds
// the first bytes of its replay log; it encodes each message itself, in
// place of grpc-go, and takes one uncontended lock a message. Backoff,
// timers and errors are built only after a failure.
package interceptor
