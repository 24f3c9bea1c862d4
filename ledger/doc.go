// Package ledger is the plugin's half of respawn's exactly-once calls:
// gRPC server interceptors that record, for each unary call and client
// stream that carries a
// ledger id from respawn's host (which gives one to exactly the calls it
// cannot run twice: interceptor.WithLedger), that it started (before its
// handler runs) and how it completed (after), in a file that outlives the
// plugin's process. When the plugin dies with the call in flight, the host retries
// the call on the plugin's successor with the same id, and the successor's
// ledger answers it from the dead plugin's records instead of running it
// again.
//
// A plugin adds it with its server options, in a plain grpc.Server:
//
//	s := grpc.NewServer(ledger.ServerOptions(ledger.Config{})...)
//
// or in a go-plugin plugin's GRPCServer func, which is given the options:
//
//	GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
//		return grpc.NewServer(append(opts, ledger.ServerOptions(ledger.Config{})...)...)
//	},
//
// The host turns it on (interceptor.WithLedger); without it, or in a
// process not launched by respawn, [ServerOptions] returns none.
//
// # What a retry is answered
//
// A retry (a call whose metadata carries x-respawn-ledger-retry, which names
// the ledger files of the plugins that died with it) is looked up in those
// files, and only those:
//
//   - completed there: the recorded status and response, without running
//     the handler; the trailer x-respawn-ledger is "replayed". A handler
//     that returned a typed nil response, which its caller got as an empty
//     message, is answered an empty message.
//   - started, not completed (its plugin died in its handler, or before it
//     recorded the completion): the method's resolver answers, if
//     [Config].Resolvers has one that knows; otherwise codes.Unknown, with
//     the trailer "interrupted". The host reports it as an outcome unknown.
//   - completed, but the response was not kept (over [Config].MaxResponse,
//     not a proto message, or no longer decodable): codes.DataLoss, with
//     the trailer "response-lost".
//   - no record: the call runs now, recorded as any other.
//   - a named file that cannot be read (removed, replaced, not a regular
//     file): codes.Unknown with the trailer "unreadable", unrun: whether it
//     ran cannot be told. The host reports an outcome unknown.
//
// A resolver's answer has the trailer "resolved"; a resolver that panics
// cannot tell. A first attempt never reads a file. A started record that
// cannot be written fails the call with codes.Unavailable, unrun: a call
// never runs unrecorded. A record the file system took only part of (a
// full disk) is cut off the file again, so that it hides none written
// after it. A plugin whose ledger file is removed under it (its directory
// deleted) goes on serving, and recording in its file, which the host
// still measures for its bound (redial's Recycle.Ledger); the host,
// finding no ledger file of a plugin that died, fails a call that was in
// flight in it with ErrOutcomeUnknown, as without the ledger.
//
// # What is not recorded
//
// Calls without a ledger id (the host sends none for calls it may run
// again), grpc.health.v1 and go-plugin's own services go straight to their
// handler, at the cost of a map lookup and no allocation.
//
// Server and bidirectional streams are not recorded. A server stream sends
// many responses and its caller may hold part of them when the plugin
// dies: no single record can say what the retry should answer. A
// bidirectional stream's request is many messages interleaved with its
// answers, some of which its caller may hold. A non-idempotent one in
// flight at its plugin's death still fails with the host's
// ErrOutcomeUnknown.
//
// # Client streams (uploads)
//
// A client stream with a ledger id is recorded as a unary call is; its
// response is held until its completion is recorded, then sent. Its retry
// says what the host sent (x-respawn-ledger-sent): the CRC-32C and length
// of the messages' encoded bytes, and whether they all follow or only the
// first (the host's replay log could not keep them). It is answered from a
// completed record, at any size; from the method's [StreamResolver]
// (Config.StreamResolvers), given an [Upload], if it was interrupted in its
// handler; and, when the ledgers show it never started or the resolver
// answers NotDone, it runs now if all the messages follow, else it fails
// unrun with codes.Unknown and the trailer "not-started" or
// "not-replayable".
//
// # The same id twice
//
// The host makes every ledger id itself, under a key of its own, replacing
// any its caller's ctx carries (forwarded metadata, say), and retries only
// once the plugin that had the call is dead. A call whose id is already in
// flight in this plugin (sent by something else) fails at once with
// codes.Aborted, "already running in this plugin; not run twice", and the
// first goes on: the handler never runs twice at once for one id. An id
// longer than 128 bytes fails with codes.InvalidArgument, unrun.
//
// # What survives
//
// Each record is a frame with its length and a CRC-32C of its contents,
// appended to the plugin's own file. On Linux the file is mapped shared
// into the plugin's memory, preallocated (fallocate(2)) 64 KiB at a time
// past its records, and a record is stored into the mapping, with no
// system call: the store is in the page cache at once, where it survives
// the plugin's process whatever ends it (SIGKILL, an OOM kill, a panic),
// as a write(2) that returned does. Its length is stored last, so that a
// process killed in the store leaves no frame or a whole one, and a
// reader sees the zeros past the records, their end, until then (or, on
// a CPU that orders stores otherwise, a frame whose checksum fails, which
// readers ignore). A file that cannot grow (a full disk) fails the record
// as a failed write does, before any of it is stored. Elsewhere, and for a
// file that cannot be preallocated or mapped (a file system without
// either, a seccomp filter that refuses fallocate), each record is one
// write(2). The host never truncates a plugin's file; one cut short by
// another process under the mapping fails the plugin's records from then
// on (its stores fault, SIGBUS, which the ledger catches), and its calls
// with them. A
// record does not survive a power loss or a kernel crash unless
// [Config].Sync is set, which msyncs (fsyncs, with write(2)) every record
// before the call goes on, at the cost of a disk flush per record. A
// process that dies in its write(2) leaves at most one torn frame, its
// last, which readers detect and ignore.
//
// # What it costs
//
// Per recorded call: two records (started, completed) stored into the
// file's mapping (on Linux; two write(2)s elsewhere), the response's
// encoding into a pooled buffer, and one allocation (the ledger id, copied
// out of the metadata). Measured on 2 shared cores of an Intel Xeon VM,
// ext4: the interceptor alone adds 0.7 µs (1.3 to 1.8 with write(2)), and
// about 0.5 ms with [Config].Sync. End to end, a recorded call over a unix
// socket costs the plugin 3.5 to 5.9 µs more CPU than one to a plain
// server under the same host (medians 4.3 and 4.8 in sets of runs at load
// 3 to 5, against 5.8 and 6.3 with write(2) in the same runs), and three
// more allocations, two of them grpc-go's: any unary server interceptor,
// this one included, costs grpc-go's generated handler two allocations
// per call. A call that is not recorded costs about 0.1 µs and no
// allocation. See docs/ledger.md and bench/README.md (BenchmarkLedger) for
// how it is measured.
//
// On disk, per recorded call: a started record of 11 bytes plus the id and
// the method name, and a completed record of 13 bytes plus the id, the
// method name and the status (0 bytes for OK; a failed call's code,
// message and details), and for a kept response 1 byte, its message type's
// full name and its encoded bytes (up to [Config].MaxResponse). With
// respawn's 24-byte ids and a 30-byte method name, a success is 133 bytes
// plus the type name and the response. A plugin's own file grows by that
// for every call it records while it lives (on Linux, 64 KiB at a time,
// preallocated, of which it uses what it records), until the host replaces a
// plugin whose ledger outgrows its bound (redial's Recycle.Ledger); the
// host deletes a dead plugin's file once none of its calls can be retried,
// and all of them when its Conn closes.
//
// # Security
//
// The ledger holds responses. The host makes the file, empty, mode 0600,
// in a directory of this user's that no one else can enter (it makes it
// 0700 for one Conn), and the plugin opens it with O_NOFOLLOW only if it
// is still that: anything else turns the ledger off. The plugin writes
// first in it the launch's key (RESPAWN_LEDGER_KEY) and its pid, by which
// the host tells the plugin's own ledger from a file another process
// opened first; on Linux the host also checks that the plugin's process
// holds the file open, which a process that opened its ledger and then
// replaced its program (exec) does not: call ServerOptions in the program
// that serves. ServerOptions reads RESPAWN_LEDGER and RESPAWN_LEDGER_KEY
// once and removes them from the environment, so that processes the
// plugin starts afterwards do not inherit them; later calls return the
// same options. Retries read only regular files with a ledger file's name
// in that directory, never through a symlink, and allocate no more for a
// record than the file holds.
package ledger
