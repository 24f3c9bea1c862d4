package interceptor

// A client stream (one response) that is not idempotent is kept in the
// plugins' ledgers (WithLedger) as a unary call is: it carries a ledger
// id, and a death of its plugin re-opens it with that id on the successor,
// whose ledger answers from the dead plugin's record, asks the method's
// resolver, or runs it from what the host sends again. The host sends
// again all it sent, if its replay log kept it; otherwise only the first
// message (where an upload names its object) and closes, and the ledger
// answers without running it.

import (
	"context"
	"hash/crc32"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/redial"
)

// ledgeredStream reports whether a stream of method, described by desc, is
// kept in the plugins' ledgers: a client stream that respawn could not
// otherwise send again, were its plugin to die under it.
func (p *Policy) ledgeredStream(desc *grpc.StreamDesc, method string, opts []grpc.CallOption) bool {
	return kindOf(desc) == clientStreaming && p.ledgered(method, nil, opts)
}

// ledgerSent is what a ledgered stream keeps of what it sent, besides its
// replay log: the digest and length that a resolver is given, and its
// first message once the log could not keep them all.
type ledgerSent struct {
	digest uint32   // CRC-32C of the encoded messages sent, one after the other
	length int64    // their total length
	first  *encoded // the first message, kept when the log is dropped
	// sealed: the current attempt, a ledger retry, carries the first
	// message only and is closed: a later SendMsg returns io.EOF, and
	// RecvMsg reads the ledger's answer.
	sealed bool
	// held: the ledgers held before the stream had a retrier.
	held []*redial.Generation
	// cause: the failure that led to the current re-open.
	cause error
	// stop ends the release of the ledgers at the caller's ctx's end.
	stop func() bool
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// add adds data, a message's encoding, to the digest and length.
func (l *ledgerSent) add(data mem.BufferSlice) {
	for _, b := range data {
		l.digest = crc32.Update(l.digest, castagnoli, b.ReadOnlyData())
	}
	l.length += int64(data.Len())
}

// holdFirst holds the ledger of g, the first attempt's plugin, for as long
// as a ledgered stream lasts.
func (s *stream) holdFirst(g *redial.Generation) {
	if s.led {
		g.Ledger().Hold()
		s.sent.held = append(s.sent.held, g)
	}
}

// keepFirstLocked keeps a ledgered stream's first message as its replay
// log is dropped; data is the message being sent, the first if none was.
func (s *stream) keepFirstLocked(data mem.BufferSlice) {
	switch {
	case !s.led || s.sent.first != nil:
	case s.log.len() > 0:
		s.sent.first = s.log.message(0) // the dropped log's bytes are not written again
	case s.nsent == 0 && data != nil:
		s.sent.first = &encoded{data: mem.BufferSlice{mem.SliceBuffer(data.Materialize())}}
	}
}

// ledgerAttemptLocked returns the ctx of a ledgered stream's attempt on g:
// after a death, it names the dead plugins' ledgers and says what was sent
// and whether all of it follows. A stream whose log was dropped is sealed:
// the attempt carries its first message only. It holds g's ledger.
func (s *stream) ledgerAttemptLocked(ctx context.Context, g *redial.Generation) (context.Context, error) {
	ctx, err := s.r.ledgerAttempt(ctx, g, s.sent.cause)
	if err != nil {
		return nil, err
	}
	whole := !s.committed
	switch {
	case len(s.r.deadFiles) > 0:
		sent := ledgerwire.Sent{All: whole, Digest: s.sent.digest, Length: s.sent.length}
		ctx = metadata.AppendToOutgoingContext(ctx, ledgerwire.SentKey, sent.String())
	case !whole:
		// No dead plugin's ledger can answer for it, and it cannot be sent again.
		return nil, outcomeUnknown(ctx, s.h, g, s.method, s.r.attempt, reasonCommitted, s.sent.cause)
	}
	s.sent.sealed = !whole
	s.r.holdLedger(g)
	return ctx, nil
}

// sendFirstLocked sends a sealed attempt its first message, if any was
// sent, and closes its sending side.
func (s *stream) sendFirstLocked(cs interface {
	SendMsg(any) error
	CloseSend() error
}) error {
	var err error
	if s.sent.first != nil {
		err = cs.SendMsg(s.sent.first)
	}
	if err == nil {
		err = cs.CloseSend()
	}
	if err == io.EOF {
		return nil
	}
	return err
}

// resentLocked is what SendMsg returns once its stream runs on a new
// attempt: nil, the message having been sent again, or io.EOF if the new
// attempt is sealed and RecvMsg reads the answer.
func (s *stream) resentLocked(onSend bool) error {
	if onSend && s.led && s.sent.sealed {
		return io.EOF
	}
	return nil
}

// fromLedgerLocked returns err, the plugin's end of a ledgered stream's
// attempt, as the caller gets it: an answer given for a dead plugin's
// stream that says it ran or may have run is an outcome unknown (see
// [retrier.fromLedger]).
func (s *stream) fromLedgerLocked(err error) error {
	if !s.led || s.r == nil {
		return err
	}
	return s.r.fromLedger(s.ctx, s.a.g, s.cs.Trailer(), err)
}

// releaseLedgers is releaseLedgersLocked, at the end of the caller's ctx.
func (s *stream) releaseLedgers() {
	s.mu.Lock()
	s.releaseLedgersLocked()
	s.mu.Unlock()
}

// releaseLedgersLocked ends the holds of a ledgered stream on its
// plugins' ledgers, once it has ended.
func (s *stream) releaseLedgersLocked() {
	if s.r != nil {
		s.r.releaseLedgers()
		s.r.held = nil
	}
	for _, g := range s.sent.held {
		g.Ledger().Release()
	}
	s.sent.held = nil
}
