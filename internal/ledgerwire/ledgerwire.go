// Package ledgerwire is the contract between the host's half of the
// ledger (redial keeps the directory and passes each launch its file;
// interceptor retries through it) and the plugin's half (package ledger):
// the environment variable, the file names and the trailer that marks an
// answer given from a ledger. One place, so that the two halves cannot
// drift apart.
package ledgerwire

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Env names the environment variable that gives a plugin the absolute path
// of its ledger file, in a directory the host made for one Conn (mode
// 0700). The host makes the file, empty, and the plugin opens it; its
// siblings in the directory are the ledgers of the Conn's other plugins,
// dead or alive.
const Env = "RESPAWN_LEDGER"

// Chunk is how far ahead of its records a plugin may have grown its
// ledger file: on Linux the file is preallocated Chunk bytes at a time and
// its records stored into a mapping of it, its zero-filled rest read as
// their end. The host, which measures the file's size, counts a bound
// below Chunk as Chunk.
const Chunk = 64 << 10

// IDKey is the metadata key of a call's ledger id. The host gives one, of
// its own making, to each call it keeps in the ledgers
// (interceptor.WithLedger), and only to those, replacing any its ctx
// carries; the plugin records exactly the calls that carry one. RetryKey
// marks an attempt sent after a plugin died with the call in it: its value
// names the ledger files of those dead plugins, comma-separated (see
// FileName), and the plugin looks the id up in those files, and only
// those, before it runs anything. Neither is interceptor.CallIDKey,
// which a caller may set, nor go-grpc-middleware's x-retry-attempt, which
// another retry layer sets.
const (
	IDKey    = "x-respawn-ledger-id"
	RetryKey = "x-respawn-ledger-retry"
)

// SentKey marks the retry of a client stream: its value, written by
// [Sent.String], says what the host sent on the stream before its plugin
// died and whether it sends all of it again on the retry, or only its
// first message.
const SentKey = "x-respawn-ledger-sent"

// Sent is what the host sent on a client stream it retries: the CRC-32C
// (Castagnoli) of the messages' encoded bytes, one after the other, as
// the host's codec made them (without gRPC's 5-byte message prefixes),
// their total length, and whether the retry carries them all (All) or
// only the first message (the host's replay log could not keep them).
type Sent struct {
	All    bool
	Digest uint32
	Length int64
}

// String returns s as SentKey's value: "all" or "first", the digest in 8
// hex digits, and the length in decimal, separated by spaces.
func (s Sent) String() string {
	what := "first"
	if s.All {
		what = "all"
	}
	return fmt.Sprintf("%s %08x %d", what, s.Digest, s.Length)
}

// ParseSent parses SentKey's value, as [Sent.String] writes it.
func ParseSent(v string) (Sent, bool) {
	f := strings.Fields(v)
	if len(f) != 3 || (f[0] != "all" && f[0] != "first") || len(f[1]) != 8 {
		return Sent{}, false
	}
	d, err := strconv.ParseUint(f[1], 16, 32)
	if err != nil {
		return Sent{}, false
	}
	n, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || n < 0 {
		return Sent{}, false
	}
	return Sent{All: f[0] == "all", Digest: uint32(d), Length: n}, true
}

// MaxRetryFiles bounds the ledger files a retry names: past that many
// deaths under one call, the host stops and reports the outcome unknown.
const MaxRetryFiles = 16

// MaxCallID bounds the length of a call id the ledger records; respawn's are
// 24 bytes.
const MaxCallID = 128

// TrailerKey is the trailer a plugin's ledger sets on an answer it gave
// from a ledger rather than by running the handler, with one of the values
// below.
const TrailerKey = "x-respawn-ledger"

const (
	// Replayed: the call had completed on a dead plugin; the answer is the
	// recorded one.
	Replayed = "replayed"
	// Interrupted: the call was in its handler when its plugin died, and no
	// resolver could tell whether it took effect.
	Interrupted = "interrupted"
	// ResponseLost: the call had completed on a dead plugin, but its
	// response was too large to keep (or could not be decoded).
	ResponseLost = "response-lost"
	// Resolved: the call was in its handler when its plugin died, and the
	// method's resolver answered.
	Resolved = "resolved"
	// Unreadable: the ledgers could not be read, so whether the call ran is
	// unknown; it was not run.
	Unreadable = "unreadable"
	// NotStarted: no dead plugin had started a client stream, and the host
	// could not send all of it again: it was not run.
	NotStarted = "not-started"
	// NotReplayable: a client stream's resolver found that it did not take
	// effect on a dead plugin, and the host could not send all of it
	// again: it was not run.
	NotReplayable = "not-replayable"
)

// suffix ends every ledger file's name.
const suffix = ".ledger"

// FileName returns the name of the ledger file of the launch-th launch.
func FileName(launch uint64) string {
	return strconv.FormatUint(launch, 10) + suffix
}

// IsFileName reports whether name is a ledger file's name: decimal digits,
// then ".ledger". Nothing else in a ledger directory is read or removed.
func IsFileName(name string) bool {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok || digits == "" || len(digits) > 20 {
		return false
	}
	for _, c := range []byte(digits) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ValidPath reports whether path, as found in [Env], names a ledger file:
// absolute, clean, with a ledger file's name.
func ValidPath(path string) bool {
	return filepath.IsAbs(path) && filepath.Clean(path) == path && IsFileName(filepath.Base(path))
}

// Point is a step of a recorded call at which a test plugin can have
// itself killed (see At).
type Point int

const (
	BeforeStarted  Point = iota + 1 // before the started record is written
	AfterStarted                    // after it, before the handler runs
	AfterHandler                    // after the handler, before the completed record
	AfterCompleted                  // after the completed record, before the response is sent
)

// At, when set, is called by the plugin's ledger at each Point of every
// recorded call. Only test plugins set it, before serving; nil costs a
// nil check.
var At func(Point)
