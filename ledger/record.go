package ledger

import (
	"encoding/binary"
	"errors"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
)

// A ledger file is a sequence of frames (see package ledgerwire), each
// stored into the file's mapping on Linux (see mapping) or written by one
// write(2) elsewhere, the first of them the file's opened record; the
// others are the records of calls:
//
//	kind byte                     kindStarted or kindCompleted
//	id, method                    uvarint length, bytes
//	completed only:
//	  flags byte                  flagResponse: the response is kept
//	  status                      uvarint length, bytes (google.rpc.Status; empty is OK)
//	  with flagResponse:
//	    type                      uvarint length, bytes (the message's full name)
//	    response                  the rest of the payload (proto bytes)
//
// A frame that is short, whose length runs past the end of the file, whose
// checksum is wrong or whose payload does not decode ends the file: a
// plugin that dies in its write(2) leaves at most one such frame, its last.
// So does a zero length, which no frame has: the zero-filled rest of a file
// preallocated past its records.

const headerSize = ledgerwire.FrameHeader

const (
	kindStarted   byte = 1
	kindCompleted byte = 2
	kindOpened         = ledgerwire.KindOpened
)

const flagResponse byte = 1

// errCorrupt: a frame's payload passed its checksum but is not a record.
var errCorrupt = errors.New("ledger: corrupt record")

// record is one decoded record. Its byte slices alias the payload it was
// decoded from.
type record struct {
	kind       byte
	id, method string
	kept       bool   // completed: the response is in resp
	status     []byte // completed: google.rpc.Status; empty for OK
	respType   string // completed and kept
	resp       []byte // completed and kept
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendStarted appends the frame of a started record.
func appendStarted(b []byte, id, method string) []byte {
	start := len(b)
	b = ledgerwire.BeginFrame(b)
	b = append(b, kindStarted)
	b = appendString(b, id)
	b = appendString(b, method)
	return ledgerwire.FinishFrame(b, start)
}

// appendCompletedHead appends a completed record's payload up to its
// response type.
func appendCompletedHead(b []byte, id, method string, kept bool, status []byte) []byte {
	b = append(b, kindCompleted)
	b = appendString(b, id)
	b = appendString(b, method)
	var flags byte
	if kept {
		flags = flagResponse
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(len(status)))
	return append(b, status...)
}

// view is one decoded record whose fields all alias the payload it was
// decoded from: reading one allocates nothing.
type view struct {
	kind       byte
	id, method []byte
	kept       bool
	status     []byte
	respType   []byte
	resp       []byte
}

// record copies v's strings.
func (v view) record() record {
	return record{kind: v.kind, id: string(v.id), method: string(v.method), kept: v.kept, status: v.status, respType: string(v.respType), resp: v.resp}
}

// is reports whether v is a record of the call k.
func (v view) is(k key) bool { return string(v.id) == k.id && string(v.method) == k.method }

// parse decodes the frames at the start of data, giving each record to
// each with its frame's offset in data and payload length, and returns the
// length of data they took: the offset of the first frame that is torn (it
// runs past data's end), corrupt or undecodable, or len(data). The views
// alias data.
func parse(data []byte, each func(v view, off, n int)) (end int) {
	for {
		n, ok := ledgerwire.FrameLen(data[end:], int64(len(data)-end))
		if !ok {
			return end
		}
		hdr, payload := data[end:end+headerSize], data[end+headerSize:end+headerSize+n]
		if !ledgerwire.CheckFrame(hdr, payload) {
			return end
		}
		v, err := decodeView(payload)
		if err != nil {
			return end
		}
		each(v, end, n)
		end += headerSize + n
	}
}

// decode decodes one record's payload. Its byte slices alias payload.
func decode(p []byte) (record, error) {
	v, err := decodeView(p)
	return v.record(), err
}

// decodeView decodes one record's payload.
func decodeView(p []byte) (view, error) {
	var r view
	if len(p) < 1 {
		return r, errCorrupt
	}
	if p[0] == kindOpened {
		if _, _, ok := ledgerwire.ParseOpened(p); !ok {
			return r, errCorrupt
		}
		r.kind = kindOpened
		return r, nil
	}
	r.kind, p = p[0], p[1:]
	var ok bool
	if r.id, p, ok = cutBytes(p); !ok {
		return r, errCorrupt
	}
	if r.method, p, ok = cutBytes(p); !ok {
		return r, errCorrupt
	}
	switch r.kind {
	case kindStarted:
		if len(p) != 0 {
			return r, errCorrupt
		}
		return r, nil
	case kindCompleted:
	default:
		return r, errCorrupt
	}
	if len(p) < 1 || p[0]&^flagResponse != 0 {
		return r, errCorrupt
	}
	r.kept, p = p[0] == flagResponse, p[1:]
	if r.status, p, ok = cutBytes(p); !ok {
		return r, errCorrupt
	}
	if !r.kept {
		if len(p) != 0 {
			return r, errCorrupt
		}
		return r, nil
	}
	if r.respType, p, ok = cutBytes(p); !ok {
		return r, errCorrupt
	}
	r.resp = p
	return r, nil
}

// cutBytes cuts a uvarint length and that many bytes off the front of p.
// A non-minimal length is corrupt, so that a record has one encoding.
func cutBytes(p []byte) (v, rest []byte, ok bool) {
	n, k := binary.Uvarint(p)
	if k <= 0 || k != uvarintLen(n) || n > uint64(len(p)-k) {
		return nil, p, false
	}
	return p[k : k+int(n)], p[k+int(n):], true
}

func uvarintLen(n uint64) int {
	k := 1
	for ; n >= 0x80; n >>= 7 {
		k++
	}
	return k
}
