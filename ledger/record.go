package ledger

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// A ledger file is a sequence of frames, each written by one write(2):
//
//	[uint32 LE length of payload][uint32 LE crc32c(payload)][payload]
//
// and each payload is one record:
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

const headerSize = 8

const (
	kindStarted   byte = 1
	kindCompleted byte = 2
)

const flagResponse byte = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

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

// beginFrame appends the room for a frame's header to b; finishFrame fills
// it in once the payload follows it.
func beginFrame(b []byte) []byte { return append(b, make([]byte, headerSize)...) }

// finishFrame fills in the header of the frame that starts at b[start:].
func finishFrame(b []byte, start int) []byte {
	payload := b[start+headerSize:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(payload, castagnoli))
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendStarted appends the frame of a started record.
func appendStarted(b []byte, id, method string) []byte {
	start := len(b)
	b = beginFrame(b)
	b = append(b, kindStarted)
	b = appendString(b, id)
	b = appendString(b, method)
	return finishFrame(b, start)
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

// frameLen reads the header at the start of hdr, of a frame that has rest
// bytes of the file from its first byte on. It returns the payload length
// the header claims, and whether the frame can be whole: a header not yet
// complete, or a length longer than what the file has left, is a torn
// frame, and nothing is allocated for it.
func frameLen(hdr []byte, rest int64) (int, bool) {
	if len(hdr) < headerSize {
		return 0, false
	}
	n := binary.LittleEndian.Uint32(hdr)
	if int64(n) > rest-headerSize {
		return 0, false
	}
	return int(n), true
}

// checkFrame reports whether payload matches the checksum in hdr.
func checkFrame(hdr, payload []byte) bool {
	return binary.LittleEndian.Uint32(hdr[4:]) == crc32.Checksum(payload, castagnoli)
}

// parse decodes the frames at the start of data, giving each record to
// each with its frame's offset in data and payload length, and returns the
// length of data they took: the offset of the first frame that is torn (it
// runs past data's end), corrupt or undecodable, or len(data). The records'
// byte slices alias data.
func parse(data []byte, each func(r record, off, n int)) (end int) {
	for {
		n, ok := frameLen(data[end:], int64(len(data)-end))
		if !ok {
			return end
		}
		hdr, payload := data[end:end+headerSize], data[end+headerSize:end+headerSize+n]
		if !checkFrame(hdr, payload) {
			return end
		}
		r, err := decode(payload)
		if err != nil {
			return end
		}
		each(r, end, n)
		end += headerSize + n
	}
}

// decode decodes one record's payload. Its byte slices alias payload.
func decode(p []byte) (record, error) {
	var r record
	if len(p) < 1 {
		return r, errCorrupt
	}
	r.kind, p = p[0], p[1:]
	var ok bool
	if r.id, p, ok = cutString(p); !ok {
		return r, errCorrupt
	}
	if r.method, p, ok = cutString(p); !ok {
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
	if r.respType, p, ok = cutString(p); !ok {
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

func cutString(p []byte) (string, []byte, bool) {
	v, rest, ok := cutBytes(p)
	return string(v), rest, ok
}

func uvarintLen(n uint64) int {
	k := 1
	for ; n >= 0x80; n >>= 7 {
		k++
	}
	return k
}
