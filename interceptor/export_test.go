package interceptor

import "google.golang.org/grpc"

// The names the external tests use for what the package keeps unexported.

// Classify is classify.
var Classify = classify

// Class is faultClass.
type Class = faultClass

const (
	NotConnectionFault = notConnectionFault
	NeverSent          = neverSent
	MaybeProcessed     = maybeProcessed
)

type (
	OutcomeUnknownError = outcomeUnknownError
	PoisonRequestError  = poisonRequestError
	StreamBrokenError   = streamBrokenError
	OutcomeReason       = outcomeReason
)

const (
	NotIdempotent = reasonNotIdempotent
	Committed     = reasonCommitted
)

// Idempotent is the per-call option the stream interceptor gives a resumed
// stream: whether this call may run twice, over every other source.
func Idempotent(ok bool) grpc.CallOption { return idempotentOption{ok: ok} }
