package ledgerwire

import (
	"encoding/binary"
	"hash/crc32"
)

// A ledger file is a sequence of frames, each written by one write(2) or,
// on Linux, stored into the file's shared mapping:
//
//	[uint32 LE length of payload][uint32 LE crc32c(payload)][payload]
//
// No payload is empty: a zero length ends the records, so that the
// zero-filled rest of a file preallocated past its records (on Linux) is
// read as their end.
//
// Each payload is one record, whose first byte is its kind. The first
// record of every file is its opened record (KindOpened), which the plugin
// writes when it opens the file:
//
//	kind byte      KindOpened
//	key            uvarint length, bytes: the launch's key (KeyEnv)
//	pid            uvarint: the process that opened the file
//
// The records of calls (package ledger) follow it, each kind its own
// layout; a new kind of record is a new kind byte.

// FrameHeader is the length of a frame's header.
const FrameHeader = 8

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is a frame's checksum of its payload.
func Checksum(payload []byte) uint32 { return crc32.Checksum(payload, castagnoli) }

// BeginFrame appends the room for a frame's header to b; FinishFrame fills
// it in once the payload follows it.
func BeginFrame(b []byte) []byte { return append(b, make([]byte, FrameHeader)...) }

// FinishFrame fills in the header of the frame that starts at b[start:].
func FinishFrame(b []byte, start int) []byte {
	payload := b[start+FrameHeader:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[start+4:], Checksum(payload))
	return b
}

// FrameLen reads the header at the start of hdr, of a frame that has rest
// bytes of the file from its first byte on. It returns the payload length
// the header claims, and whether the frame can be whole: a header not yet
// complete, or a length longer than what the file has left, is a torn
// frame.
func FrameLen(hdr []byte, rest int64) (int, bool) {
	if len(hdr) < FrameHeader {
		return 0, false
	}
	n := binary.LittleEndian.Uint32(hdr)
	if n == 0 || int64(n) > rest-FrameHeader {
		return 0, false
	}
	return int(n), true
}

// CheckFrame reports whether payload matches the checksum in hdr.
func CheckFrame(hdr, payload []byte) bool {
	return binary.LittleEndian.Uint32(hdr[4:]) == Checksum(payload)
}

// KindOpened is the kind of a file's first record, its opened record.
const KindOpened byte = 3

// KeyEnv names the environment variable that gives a launch its key: a
// secret of the host's making, given to that launch only, which the
// plugin's ledger writes in its file's opened record, with its pid. The
// host takes a file for the plugin's ledger only if that record holds
// both (and, on Linux, the plugin's process holds the file open): a file a
// plugin's child (which inherited the variables before the plugin
// consumed them) or another plugin wrote is not.
const KeyEnv = "RESPAWN_LEDGER_KEY"

// MaxKey bounds a key's length.
const MaxKey = 64

// MaxOpened bounds the length of an opened record's frame: the host reads
// no more of a file than that.
const MaxOpened = FrameHeader + 1 + 1 + MaxKey + binary.MaxVarintLen64

// ValidKey reports whether key, as found in KeyEnv, can be a key: 1 to
// MaxKey letters and digits.
func ValidKey(key string) bool {
	if key == "" || len(key) > MaxKey {
		return false
	}
	for _, c := range []byte(key) {
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z') {
			return false
		}
	}
	return true
}

// AppendOpened appends the frame of an opened record of key and pid.
func AppendOpened(b []byte, key string, pid int) []byte {
	start := len(b)
	b = BeginFrame(b)
	b = append(b, KindOpened)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, uint64(pid))
	return FinishFrame(b, start)
}

// ParseOpened decodes the payload of an opened record.
func ParseOpened(payload []byte) (key string, pid uint64, ok bool) {
	if len(payload) < 2 || payload[0] != KindOpened {
		return "", 0, false
	}
	p := payload[1:]
	n, k := binary.Uvarint(p)
	if k <= 0 || n > MaxKey || n > uint64(len(p)-k) {
		return "", 0, false
	}
	key, p = string(p[k:k+int(n)]), p[k+int(n):]
	pid, k = binary.Uvarint(p)
	if k <= 0 || k != len(p) {
		return "", 0, false
	}
	return key, pid, true
}

// Opened reports whether first, the first bytes of a ledger file (up to
// MaxOpened of them), begin with the opened record of key and pid: the
// file is the one that the process pid, given key, opened first.
func Opened(first []byte, key string, pid int) bool {
	n, ok := FrameLen(first, int64(len(first)))
	if !ok || !CheckFrame(first, first[FrameHeader:FrameHeader+n]) {
		return false
	}
	k, p, ok := ParseOpened(first[FrameHeader : FrameHeader+n])
	return ok && k == key && pid > 0 && p == uint64(pid)
}
