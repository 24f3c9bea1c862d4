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

// String returns the class's name, as in "never-sent".
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

// The texts grpc-go v1.85 itself gives a call whose connection failed. grpc-go
// exposes no typed signal, so these are pinned by tests that produce them
// against a real server; an upgrade that changes one fails those tests.
//
// Each is matched at the start of the status message, never anywhere in it:
// a plugin's handler that returns codes.Unavailable with its own backend's
// error ("dial tcp 10.0.0.1:443: connect: connection refused", "unexpected
// EOF") ran the call, and must be neither retried nor taken for a death.
var (
	// Unavailable before the call reached a transport. The dial and
	// handshake failures reach the call through the picker, always wrapped
	// as a transport.ConnectionError.
	neverSentText = []string{
		connErrorPrefix + "transport: ",                    // the dial or the handshake failed
		connErrorPrefix + "error reading server preface: ", // the server died during the handshake
		drainingText[0],
		drainingText[1],
		"stream terminated by RST_STREAM with error code: REFUSED_STREAM", // the server refused it unprocessed
		"name resolver error: produced zero addresses",                    // pick_first has no address
	}
	// Unavailable, the plugin's own GOAWAY: a live server asked for a new
	// connection (max connection age, too many pings).
	drainingText = [...]string{
		"the connection is draining",                                       // new stream on a transport closing on GOAWAY
		"the stream is rejected because server is draining the connection", // stream above the GOAWAY's last id
	}
	// Unavailable after the call may have reached a transport. The
	// transport hands these to its streams either bare or wrapped as a
	// transport.ConnectionError; the wrapper is removed before matching.
	maybeProcessedText = []string{
		"error reading from server: ", // the plugin died mid-call: EOF, connection reset by peer
		"transport is closing",
		"closing transport due to: ",
		"keepalive ping failed to receive ACK within timeout",
		"closing connection since the server is not reading: ",
	}
	// Internal: the stream ended with no status.
	noTrailersText = "server closed the stream without sending trailers"
	// Canceled: the ClientConn was closed under the call.
	clientConnClosing = "grpc: the client connection is closing"
)

// connErrorPrefix starts the text of a transport.ConnectionError.
const connErrorPrefix = `connection error: desc = "`

// Classify sorts a failed attempt's error into a [Class] by its gRPC code and
// the start of its message, which must be a text grpc-go's own transport
// wrote; the same text further into a message (a plugin's handler quoting
// its backend's error) does not count.
//
// [NeverSent]: codes.Unavailable starting with one of these (the first two
// are the dial and handshake failures, such as "transport: Error while
// dialing: dial unix …: connect: connection refused")
//
//	connection error: desc = "transport:
//	connection error: desc = "error reading server preface:
//	the connection is draining
//	the stream is rejected because server is draining the connection
//	stream terminated by RST_STREAM with error code: REFUSED_STREAM
//	name resolver error: produced zero addresses
//
// [MaybeProcessed]: codes.Unavailable starting with one of these, bare or
// after connection error: desc = " (the first is the plugin dying mid-call:
// EOF, connection reset by peer)
//
//	error reading from server:
//	transport is closing
//	closing transport due to:
//	keepalive ping failed to receive ACK within timeout
//	closing connection since the server is not reading:
//
// and codes.Internal "server closed the stream without sending trailers",
// and codes.Canceled "grpc: the client connection is closing": a call made on
// a connection that was closed under it may have been sent; the interceptor
// narrows that to NeverSent when it knows the attempt never reached a
// transport.
//
// [NotConnectionFault]: everything else, including an [OutcomeUnknownError].
// Classify does not know the caller's context: an error returned after the
// caller's ctx ended is never a connection fault, and the interceptor checks
// that first.
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
		if hasAnyPrefix(msg, neverSentText) {
			return NeverSent
		}
		if hasAnyPrefix(strings.TrimPrefix(msg, connErrorPrefix), maybeProcessedText) {
			return MaybeProcessed
		}
	case codes.Internal:
		if msg == noTrailersText {
			return MaybeProcessed
		}
	case codes.Canceled:
		if msg == clientConnClosing {
			return MaybeProcessed
		}
	}
	return NotConnectionFault
}

// draining reports whether err, classed [NeverSent], says a live plugin
// asked for a new connection (GOAWAY: max connection age, too many pings)
// rather than that it is gone.
func draining(err error) bool {
	return hasAnyPrefix(status.Convert(err).Message(), drainingText[:])
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
