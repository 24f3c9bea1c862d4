package interceptor

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-respawn/respawn/internal/testpb"
)

// namedCodec is the proto codec under another name.
type namedCodec struct {
	encoding.CodecV2
	name string
}

func (c namedCodec) Name() string { return c.name }

// TestWireForHonoursTheCallersCodec: a stream's messages are encoded with
// the codec grpc-go would choose from the call's options, and the
// content-subtype grpc-go derives stays what it would be.
func TestWireForHonoursTheCallersCodec(t *testing.T) {
	proto := encoding.GetCodecV2("proto")
	forced := namedCodec{proto, "forced"}
	for _, tc := range []struct {
		name      string
		opts      []grpc.CallOption
		wantCodec encoding.CodecV2 // nil: no wire codec
		wantName  string
	}{
		{"default", nil, proto, ""},
		{"ForceCodecV2", []grpc.CallOption{grpc.ForceCodecV2(forced)}, forced, "forced"},
		{"a pointer to ForceCodecV2CallOption", []grpc.CallOption{&grpc.ForceCodecV2CallOption{CodecV2: forced}}, forced, "forced"},
		{"the last codec option", []grpc.CallOption{grpc.ForceCodecV2(namedCodec{proto, "first"}), grpc.ForceCodecV2(forced)}, forced, "forced"},
		{"a content-subtype", []grpc.CallOption{grpc.CallContentSubtype("proto")}, proto, ""},
		{"an unregistered content-subtype", []grpc.CallOption{grpc.CallContentSubtype("no-such-codec")}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := wireFor(tc.opts)
			switch {
			case tc.wantCodec == nil && w != nil:
				t.Fatalf("wire codec %v, want none", w.codec)
			case tc.wantCodec == nil:
				return
			case w == nil:
				t.Fatal("no wire codec")
			case w.codec != tc.wantCodec || w.Name() != tc.wantName:
				t.Errorf("wire codec %v named %q, want %v named %q", w.codec, w.Name(), tc.wantCodec, tc.wantName)
			}
		})
	}
}

// TestWireCodecPassesEncodedBytes: an encoded message's bytes are sent as
// they are; any other message is encoded by the caller's codec.
func TestWireCodecPassesEncodedBytes(t *testing.T) {
	w := wireFor(nil)
	m := &testpb.CollectRequest{Id: "x", Seq: 7}
	want, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	e := &encoded{data: mem.BufferSlice{mem.SliceBuffer(want)}}
	for _, v := range []any{e, m} {
		got, err := w.Marshal(v)
		if err != nil || string(got.Materialize()) != string(want) {
			t.Errorf("Marshal(%T) = %x, %v; want %x", v, got.Materialize(), err, want)
		}
	}
}

// TestReplayLogGrowth: a log that grows up to its bound copies itself a
// few times, not once a message once doubling would pass the bound (100
// messages of 1 KiB under a 110 KB bound were copied 43 times).
func TestReplayLogGrowth(t *testing.T) {
	msg := mem.BufferSlice{mem.SliceBuffer(make([]byte, 1<<10+5))}
	const n, bound = 100, 110_000
	var l replayLog
	copies, last := 0, cap(l.data)
	for i := range n {
		if !l.add(msg, bound) {
			t.Fatalf("message %d: refused under a bound that holds all %d", i, n)
		}
		if c := cap(l.data); c != last {
			copies, last = copies+1, c
		}
		if cost := cap(l.data) + 8*cap(l.ends); cost > bound {
			t.Fatalf("message %d: log costs %d bytes, bound %d", i, cost, bound)
		}
	}
	if copies > 12 {
		t.Errorf("the log's bytes were reallocated %d times for %d messages, want at most 12", copies, n)
	}
	if l.add(msg, bound) && cap(l.data)+8*cap(l.ends) > bound {
		t.Errorf("a message past the bound was kept")
	}
}
