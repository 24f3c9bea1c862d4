package interceptor

import (
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/redial"
)

// faultClass says what a failed attempt tells about the plugin and the call.
type faultClass int

const (
	// notConnectionFault: the plugin answered, or the error came from the
	// caller (its deadline, its cancellation, a bad request). Never retried;
	// never respawns.
	notConnectionFault faultClass = iota
	// neverSent: the call did not reach a plugin (the dial failed, the
	// connection was refused or draining). Safe to retry for any method.
	neverSent
	// maybeProcessed: the call may have reached a plugin that then died or
	// lost its connection before answering. Retried only if the method is
	// idempotent.
	maybeProcessed
)

// String returns the class's name, as in "never-sent".
func (c faultClass) String() string {
	switch c {
	case notConnectionFault:
		return "not-connection-fault"
	case neverSent:
		return "never-sent"
	case maybeProcessed:
		return "maybe-processed"
	}
	return "faultClass(?)"
}

// rule is one way grpc-go v1.85 reports a failed connection: its code, the
// start of its message (a text with a "…" in it: its start, and its rest
// further on), the class it suggests, and whether the plugin may still live
// (a live server drained the connection: GOAWAY). The texts are
// pinned by tests that produce them against a real server, so that an
// upgrade that changes one fails there.
type rule struct {
	code  codes.Code
	text  string
	class faultClass
	live  bool
}

// rules is the classifier's table. Each text is matched at the start of
// the message, never anywhere in it, with or without the prefix of a
// transport.ConnectionError (which the dial and handshake rows require:
// grpc-go always adds it there), after grpc-go's retry wrapper.
// A text is a hint only: the interceptor acts on it only with evidence
// that the plugin's process or transport failed (see decide).
var rules = [...]rule{
	// The dial or the handshake failed; reported through the picker.
	{codes.Unavailable, connErrorPrefix + "transport: ", neverSent, false},
	{codes.Unavailable, connErrorPrefix + "error reading server preface: ", neverSent, false},
	// A plugin killed while grpc-go reconnects, between the preface and
	// the settings frame: newHTTP2Client returns the write error bare.
	{codes.Unavailable, "write unix ", neverSent, false},
	{codes.Unavailable, "write tcp ", neverSent, false},
	{codes.Unavailable, "name resolver error: produced zero addresses", neverSent, false},
	// A live plugin's GOAWAY (max connection age, too many pings) or a
	// refused stream: it did not process the call, and it lives.
	{codes.Unavailable, "the connection is draining", neverSent, true},
	{codes.Unavailable, "the stream is rejected because server is draining the connection", neverSent, true},
	{codes.Unavailable, "stream terminated by RST_STREAM with error code: REFUSED_STREAM", neverSent, true},
	// A live plugin's GOAWAY (max connection age, too many pings), then the
	// connection closed under a call it had taken: it may have run it.
	{codes.Unavailable, "closing transport due to: …, received prior goaway: ", maybeProcessed, true},
	// The transport closed under a call that may have been sent.
	{codes.Unavailable, "error reading from server: ", maybeProcessed, false},
	{codes.Unavailable, "transport is closing", maybeProcessed, false},
	{codes.Unavailable, "closing transport due to: ", maybeProcessed, false},
	{codes.Unavailable, "keepalive ping failed to receive ACK within timeout", maybeProcessed, false},
	{codes.Unavailable, "closing connection since the server is not reading: ", maybeProcessed, false},
	{codes.Internal, "server closed the stream without sending trailers", maybeProcessed, false},
	// The ClientConn was closed under the call (redial retired it).
	{codes.Canceled, clientConnClosing, maybeProcessed, false},
}

// connErrorPrefix starts the text of a transport.ConnectionError.
const connErrorPrefix = `connection error: desc = "`

// retryPrefix starts the error of grpc-go's retry policy once its attempts
// are spent; it wraps the last attempt's error with %w. Seen in a message
// only when something flattened that chain into one status.
const retryPrefix = "max retries exhausted: failed after "

// lookup finds the rule for err. ok is false when err is no status, or a
// status that no failure of the connection produces; an Unavailable with a
// text no rule knows gets the catch-all maybeProcessed rule, with known
// false: with evidence of a death it may have been processed, without it
// it is the plugin's own.
func lookup(err error) (r rule, known, ok bool) {
	s, ok := innermostStatus(err)
	if !ok {
		return rule{}, false, false
	}
	msg := unwrapRetry(s.Message())
	bare := strings.TrimPrefix(msg, connErrorPrefix)
	for _, r := range rules {
		if r.code == s.Code() && (r.matches(msg) || r.matches(bare)) {
			return r, true, true
		}
	}
	if s.Code() == codes.Unavailable {
		return rule{code: codes.Unavailable, class: maybeProcessed}, false, true
	}
	return rule{}, false, false
}

// matches reports whether msg starts with r's text, or with the start of
// a text with a "…" in it and goes on with the rest further on.
func (r rule) matches(msg string) bool {
	start, rest, _ := strings.Cut(r.text, "…")
	tail, ok := strings.CutPrefix(msg, start)
	return ok && strings.Contains(tail, rest)
}

// innermostStatus returns the status of the innermost error in err's chain
// that has one: grpc-go's retry wraps the failure with %w, and so may a
// host's interceptor, and status.FromError would keep the outer text.
func innermostStatus(err error) (*status.Status, bool) {
	var found *status.Status
	for e := err; e != nil; e = errors.Unwrap(e) {
		if gs, ok := e.(interface{ GRPCStatus() *status.Status }); ok {
			if s := gs.GRPCStatus(); s != nil {
				found = s
			}
		}
	}
	return found, found != nil
}

// unwrapRetry removes grpc-go's retry wrapper from a flattened message:
// "max retries exhausted: failed after 3 attempts: rpc error: code = … desc = …".
func unwrapRetry(msg string) string {
	for strings.HasPrefix(msg, retryPrefix) {
		_, rest, ok := strings.Cut(msg, " desc = ")
		if !ok {
			break
		}
		msg = rest
	}
	return msg
}

// classify returns the class that err's code and text suggest: the class
// of the row of respawn's table of grpc-go's own failure texts that err
// matches (grpc-go's wrappers, its retry policy's included, are seen
// through), or notConnectionFault if none does, respawn's own verdicts
// (an outcome unknown, a poison request, a plugin gone) included.
//
// An error value alone cannot say whether the plugin died. A plugin whose
// handler calls another gRPC server and returns that client's error
// unchanged produces exactly grpc-go's texts from a live, healthy process;
// and a retry layer between respawn and grpc-go can hide, behind a final
// "connection refused", an earlier attempt that reached the plugin. So the
// interceptor never acts on classify alone: it takes a failure for a
// connection fault only with evidence — the generation's process has
// exited, or its connection has left READY or been closed — waiting a
// bounded time for it ([Limits].EvidenceWait). Without evidence, any status is
// the plugin's own. With it, an Unavailable whose text no row knows is
// maybeProcessed, and neverSent holds only when the attempt is known
// not to have reached a transport (grpc.Peer on respawn's retries) or the
// plugin was known dead before the call was sent. classify does not know
// the caller's context either: an error returned after the caller's ctx
// ended is never a connection fault.
func classify(err error) faultClass {
	if err == nil || isOurVerdict(err) {
		return notConnectionFault
	}
	if r, known, ok := lookup(err); ok && known {
		return r.class
	}
	return notConnectionFault
}

// isOurVerdict reports whether err is a verdict respawn already gave, which
// no layer should take for a fresh failure.
func isOurVerdict(err error) bool {
	var v interface{ respawnVerdict() }
	return errors.As(err, &v) || errors.Is(err, redial.ErrPluginGone)
}
