package interceptor

import (
	"io"
	"math"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// A stream that may be re-opened on a new plugin sends again what it sent:
// the bytes, not the message objects, which the caller may change or reuse
// once SendMsg has returned (Velero's PutObject sends every chunk from one
// buffer). Its messages are encoded once, with the caller's codec, before
// they are sent; the attempts send those bytes as they are (wireCodec), and
// the replay log keeps a copy until the stream commits.

// wireCodec is the codec of a stream's attempts when respawn encodes its
// messages: it sends an [encoded] message's bytes as they are, and leaves
// everything else to the caller's codec.
type wireCodec struct {
	codec encoding.CodecV2 // the caller's, as grpc-go would choose it
	// name is what grpc-go derives the content-subtype from when the call
	// names none: the caller's codec's name, or "" (application/grpc) for
	// the default codec and a grpc.CustomCodec.
	name string
	opt  grpc.CallOption // grpc.ForceCodecV2 of this codec
}

// encoded is a message as its bytes: one that respawn has encoded, or one
// received that respawn keeps encoded (see [readAhead]).
type encoded struct{ data mem.BufferSlice }

// Marshal returns an encoded message's bytes, which grpc-go then owns, or
// v encoded by the caller's codec.
func (c *wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(*encoded); ok {
		return e.data, nil
	}
	return c.codec.Marshal(v)
}

// Unmarshal keeps the bytes of a message received as encoded, and
// decodes anything else with the caller's codec.
func (c *wireCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if e, ok := v.(*encoded); ok {
		data.Ref() // grpc-go frees its own reference once this returns
		e.data.Free()
		e.data = data
		return nil
	}
	return c.codec.Unmarshal(data, v)
}

// Name is the name grpc-go takes the content-subtype from.
func (c *wireCodec) Name() string { return c.name }

// protoWire is the wire codec of a call that chooses no codec: grpc-go's
// default, "proto", as registered when respawn was loaded.
var protoWire = newWireCodec(registeredCodec("proto"), "")

func newWireCodec(codec encoding.CodecV2, name string) *wireCodec {
	c := &wireCodec{codec: codec, name: name}
	c.opt = grpc.ForceCodecV2(c)
	return c
}

// wireFor returns the wire codec of a stream called with opts: it encodes
// with the codec that grpc-go would choose from them (the last codec
// option, else the content-subtype's registered codec, else "proto"). It
// returns nil if no codec is registered for the content-subtype: grpc-go
// then fails the call.
func wireFor(opts []grpc.CallOption) *wireCodec {
	var codec encoding.CodecV2
	var name, subtype string
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.ForceCodecV2CallOption:
			codec, name = o.CodecV2, o.CodecV2.Name()
		case *grpc.ForceCodecV2CallOption:
			codec, name = o.CodecV2, o.CodecV2.Name()
		case grpc.ForceCodecCallOption:
			codec, name = bytesCodec{o.Codec, o.Codec.Name()}, o.Codec.Name()
		case *grpc.ForceCodecCallOption:
			codec, name = bytesCodec{o.Codec, o.Codec.Name()}, o.Codec.Name()
		case grpc.CustomCodecCallOption:
			codec, name = bytesCodec{o.Codec, ""}, ""
		case *grpc.CustomCodecCallOption:
			codec, name = bytesCodec{o.Codec, ""}, ""
		case grpc.ContentSubtypeCallOption:
			subtype = o.ContentSubtype
		case *grpc.ContentSubtypeCallOption:
			subtype = o.ContentSubtype
		}
	}
	if codec != nil {
		return newWireCodec(codec, name)
	}
	if subtype == "" {
		subtype = "proto"
	}
	switch codec = registeredCodec(subtype); {
	case codec == nil:
		return nil
	case subtype == "proto" && codec == protoWire.codec:
		return protoWire
	}
	// With a content-subtype named, grpc-go keeps it: name is unused.
	return newWireCodec(codec, "")
}

// registeredCodec returns the codec registered for name, as grpc-go looks
// it up: a codec of the older interface first.
func registeredCodec(name string) encoding.CodecV2 {
	if c := encoding.GetCodec(name); c != nil {
		return bytesCodec{c, c.Name()}
	}
	return encoding.GetCodecV2(name)
}

// bytesCodec is a codec of the older interfaces (encoding.Codec,
// grpc.Codec), which encode to one []byte.
type bytesCodec struct {
	c interface {
		Marshal(v any) ([]byte, error)
		Unmarshal(data []byte, v any) error
	}
	name string
}

func (c bytesCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, err := c.c.Marshal(v)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (c bytesCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return c.c.Unmarshal(data.Materialize(), v)
}

func (c bytesCodec) Name() string { return c.name }

// replayLog keeps the bytes of the messages a stream sent, as they were
// encoded for its first attempt, for a new attempt to send again. Its
// cost is the memory it holds: the bytes, and 8 bytes a message to find
// them, as allocated. A short log lives in the stream's own allocation.
type replayLog struct {
	data  []byte // the messages, one after the other
	ends  []int  // where each message ends in data
	spent bool   // dropped once: the inline arrays may still be on the wire

	small    [64]byte
	smallEnd [4]int
}

// add keeps a copy of data, one message's encoding, if the log then costs
// no more than bound bytes; it reports whether it did.
func (l *replayLog) add(data mem.BufferSlice, bound int) bool {
	if l.data == nil && !l.spent {
		l.data, l.ends = l.small[:0], l.smallEnd[:0]
	}
	n := len(l.data) + data.Len()
	dataCap, endsCap := cap(l.data), cap(l.ends)
	if n > dataCap {
		dataCap = max(n, 2*dataCap)
	}
	if len(l.ends) == endsCap {
		endsCap = max(4, 2*endsCap)
	}
	if dataCap+8*endsCap > bound {
		// Near the bound, grow to what the bound leaves: one more copy of
		// the log, not one a message.
		if dataCap > cap(l.data) {
			dataCap = max(n, bound-8*endsCap)
		}
		if dataCap+8*endsCap > bound {
			return false
		}
	}
	if dataCap > cap(l.data) {
		l.data = append(make([]byte, 0, dataCap), l.data...)
	}
	if endsCap > cap(l.ends) {
		l.ends = append(make([]int, 0, endsCap), l.ends...)
	}
	for _, b := range data {
		l.data = append(l.data, b.ReadOnlyData()...)
	}
	l.ends = append(l.ends, len(l.data))
	return true
}

// len returns how many messages the log keeps.
func (l *replayLog) len() int { return len(l.ends) }

// message returns the i-th message kept, to send on a new attempt.
func (l *replayLog) message(i int) *encoded {
	start := 0
	if i > 0 {
		start = l.ends[i-1]
	}
	return &encoded{data: mem.BufferSlice{mem.SliceBuffer(l.data[start:l.ends[i]:l.ends[i]])}}
}

// drop empties the log. Its bytes are not written again: an attempt's
// transport may still be sending them.
func (l *replayLog) drop() {
	l.data, l.ends, l.spent = nil, nil, true
}

// replayLocked sends the replay log again on cs, a new attempt's stream,
// and closes its sending side if the caller did. A new attempt that ends
// under the replay (io.EOF) is left to RecvMsg: its plugin answered and
// closed the stream, or died, and RecvMsg reads which.
func (s *stream) replayLocked(cs interface {
	SendMsg(any) error
	CloseSend() error
}) error {
	if s.led && s.sent.sealed {
		return s.sendFirstLocked(cs)
	}
	var err error
	for i := 0; err == nil && i < s.log.len(); i++ {
		err = cs.SendMsg(s.log.message(i))
	}
	if err == nil && s.closeSent {
		err = cs.CloseSend()
	}
	if err == io.EOF {
		return nil
	}
	return err
}

// encode encodes m once, for every attempt, if the stream keeps what it
// sends: it returns what to send for m, and m's bytes (nil if not encoded:
// the stream keeps nothing, or the codec failed, which grpc-go reports).
// One goroutine at a time sends, as grpc-go requires: out is its own.
func (s *stream) encode(m any) (any, mem.BufferSlice) {
	if s.wire == nil {
		return m, nil
	}
	data, err := s.wire.codec.Marshal(m)
	if err != nil {
		return m, nil
	}
	s.out.data = data
	return &s.out, data
}

// keepLocked keeps data, the encoding of m, in the replay log, and reports
// whether it could: a server stream keeps its one request, a client or
// bidirectional stream what [Limits].ReplayBuffer allows.
func (s *stream) keepLocked(m any, data mem.BufferSlice) bool {
	switch {
	case data == nil:
		return false
	case s.kind != serverStreaming:
		return s.log.add(data, s.p.replayBuffer())
	case s.nsent > 0:
		return false
	}
	s.req = m
	return s.log.add(data, math.MaxInt)
}
