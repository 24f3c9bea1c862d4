package interceptor

import "google.golang.org/grpc"

// streamEvent is what happens on a stream that the commit rule weighs.
type streamEvent uint8

const (
	// headerReceived: a response header arrived.
	headerReceived streamEvent = iota
	// messageReceived: a response message arrived.
	messageReceived
	// endedByPlugin: the plugin ended the attempt: a status in its
	// trailers (a trailers-only answer among them), or a clean end.
	endedByPlugin
	// contextTaken: the caller took the stream's Context.
	contextTaken
	// bufferFull: what was sent is more than the replay log keeps: past
	// [Limits].ReplayBuffer, or a server stream's second message.
	bufferFull
	numStreamEvents
)

// streamKind is a stream's kind, from its grpc.StreamDesc.
type streamKind uint8

const (
	serverStreaming streamKind = iota // one message sent, many received
	clientStreaming                   // many sent, one received
	bidiStreaming                     // many sent, many received
	numStreamKinds
)

// kindOf returns the kind of a stream described by desc.
func kindOf(desc *grpc.StreamDesc) streamKind {
	switch {
	case !desc.ClientStreams:
		return serverStreaming
	case !desc.ServerStreams:
		return clientStreaming
	}
	return bidiStreaming
}

// commitTable is the commit rule: whether an event commits a stream of a
// kind. A committed stream is never re-opened on a new plugin: a death
// after that ends it (see the package documentation, "Streams").
//
// As grpc-go's retries do, a response header or message, the plugin's own
// end, or a send past the replay log commits the stream. A server stream
// is the exception for its header: its caller has seen nothing of the
// answer until a message, and re-opening it sends one request again, which
// the method's idempotency allows or not; Header then returns the header
// of the attempt that answers. Taking the Context commits no stream
// (grpc-go's does): the stream's Context outlives its attempts.
var commitTable = [numStreamKinds][numStreamEvents]bool{
	serverStreaming: {headerReceived: false, messageReceived: true, endedByPlugin: true, contextTaken: false, bufferFull: true},
	clientStreaming: {headerReceived: true, messageReceived: true, endedByPlugin: true, contextTaken: false, bufferFull: true},
	bidiStreaming:   {headerReceived: true, messageReceived: true, endedByPlugin: true, contextTaken: false, bufferFull: true},
}

// commits reports whether e commits a stream described by desc.
func commits(desc *grpc.StreamDesc, e streamEvent) bool {
	return commitTable[kindOf(desc)][e]
}
