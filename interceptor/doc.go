// Package interceptor is respawn's call policy: unary and stream client
// interceptors that notice a call failed because its plugin died, have
// package redial start a fresh plugin, and retry the call when that is safe.
//
// # What is retried
//
// Each failed attempt is sorted by [Classify]:
//
//   - [NeverSent]: the call never reached a plugin (dial failed, connection
//     refused, socket gone). Retried for any method, on a new plugin; but a
//     live plugin that drains its connection (GOAWAY: max connection age,
//     too many pings) is kept, and the call retried on it.
//   - [MaybeProcessed]: the call reached a plugin that died before answering.
//     Retried only for idempotent methods. Any other method fails with an
//     [OutcomeUnknownError] (codes.Unavailable, matches [ErrOutcomeUnknown]);
//     the plugin is respawned all the same, so the next call works.
//   - [NotConnectionFault]: everything else, including codes.Unavailable
//     returned by the plugin's own handler and the caller's own deadline.
//     Never retried, never respawns.
//
// Idempotency comes from, in order: the per-call option [Idempotent];
// [WithIdempotentMethods] and [WithIdempotencyFunc]; the proto method option
// idempotency_level (NO_SIDE_EFFECTS or IDEMPOTENT). Unknown means not
// idempotent.
//
// Retries are bounded by [WithMaxAttempts] and by the caller's deadline; they
// use grpc.WaitForReady(true) so an attempt waits for the new plugin to come
// up, and (except a client or bidirectional stream's) stop waiting if that
// plugin's process exits.
//
// # Installing
//
// Pass a [Policy] to redial.WithPolicy and every connection the Conn makes
// carries the interceptors. For a connection dialled by someone else (a
// go-plugin client), add [DialOptions] to its dial options. The interceptors
// are chained (grpc.WithChainUnaryInterceptor), so they compose with the
// host's own; those given first run once per call, outside respawn's retries.
//
// Methods that belong to one plugin instance ([InstanceMethod]: those
// hashicorp/go-plugin sends on its own, and grpc.health.v1) pass through
// untouched; [WithPassthrough] changes that list.
//
// # Cost
//
// A unary call that succeeds on the current plugin costs two pointer loads
// and a comparison, and allocates nothing more than grpc-go does. A
// server-streaming call allocates one object more, the wrapper that can
// re-open it before its first response; a client or bidirectional stream
// none. Backoff, timers and errors are built only after a failure.
package interceptor
