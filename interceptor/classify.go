package interceptor

import (
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Class says what a failed attempt tells about the plugin and the call.
type Class int

const (
	// NotConnectionFault: the plugin answered, or the error came from the
	// caller (its deadline, its cancellation, a bad request). Never retried;
	// never respawns.
	NotConnectionFault Class = iota
	// NeverSent: the call did not reach a plugin (the dial failed, the
	// connection was refused or draining). Safe to retry for any method.
	NeverSent
	// MaybeProcessed: the call reached a plugin that then died or dropped
	// the connection before answering. Retried only if the method is
	// idempotent.
	MaybeProcessed
)

func (c Class) String() string {
	switch c {
	case NotConnectionFault:
		return "not-connection-fault"
	case NeverSent:
		return "never-sent"
	case MaybeProcessed:
		return "maybe-processed"
	}
	return "Class(?)"
}

// Error texts grpc-go (v1.85) gives a call whose connection failed. grpc-go
// exposes no typed signal, so these are pinned by tests that produce each one
// against a real server; an upgrade that changes one fails those tests.
var (
	neverSentText = []string{
		"while dialing",                // dial failed: socket gone, connection refused
		"connection refused",           //
		"no such file or directory",    // unix socket removed
		"error reading server preface", // the server died during the handshake
		"connection closed before server preface received",
		"produced zero addresses",
		"all SubConns are in TransientFailure",
		"the connection is draining",        // new stream on a draining transport
		"server is draining the connection", // stream refused by GOAWAY
		"stream terminated by RST_STREAM with error code: REFUSED_STREAM",
	}
	maybeProcessedText = []string{
		"error reading from server", // the plugin died mid-call
		"transport is closing",
		"closing transport due to",
		"connection reset by peer",
		"broken pipe",
		"keepalive ping failed",
		"server closed the stream without sending trailers",
		"RST_STREAM",
		"EOF",
	}
	clientConnClosing = "grpc: the client connection is closing"
)

// Classify sorts a failed attempt's error into a [Class] by its gRPC code and
// text. A call made on a connection that was closed under it ("the client
// connection is closing") is MaybeProcessed, since it may have been sent;
// the interceptor narrows that to NeverSent when it knows the attempt never
// reached a transport. Classify does not know the caller's context: an error
// returned after the caller's ctx ended is never a connection fault, and the
// interceptor checks that first.
func Classify(err error) Class {
	if err == nil {
		return NotConnectionFault
	}
	var ue interface{ unknownOutcome() }
	if errors.As(err, &ue) {
		return NotConnectionFault
	}
	s, ok := status.FromError(err)
	if !ok {
		return NotConnectionFault
	}
	msg := s.Message()
	switch s.Code() {
	case codes.Unavailable:
		if containsAny(msg, neverSentText) {
			return NeverSent
		}
		if containsAny(msg, maybeProcessedText) {
			return MaybeProcessed
		}
	case codes.Internal:
		if strings.Contains(msg, "server closed the stream without sending trailers") {
			return MaybeProcessed
		}
	case codes.Canceled:
		if msg == clientConnClosing {
			return MaybeProcessed
		}
	}
	return NotConnectionFault
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
