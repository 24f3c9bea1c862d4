package ledger

// A client stream (one response) that carries a ledger id is recorded as a
// unary call is: started before its handler runs, completed (status and
// response) once it returns. Its response is held until then, so that it
// reaches the host only after its completed record, as a unary call's
// does. Server and bidirectional streams are not recorded: their
// responses are many, and the host may hold part of them.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/internal/ownrpc"
)

func (l *ledger) interceptStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	method := info.FullMethod
	if !info.IsClientStream || info.IsServerStream || ownrpc.Instance(method) {
		return handler(srv, ss)
	}
	ctx := ss.Context()
	id, recorded, err := callID(ctx, method)
	if !recorded {
		return handler(srv, ss)
	}
	if err != nil {
		return err
	}
	if !l.enter(id) {
		return status.Errorf(codes.Aborted, "ledger: call %s of %s is already running in this plugin; not run twice", id, method)
	}
	defer l.leave(id)
	files, retry, err := l.retryFiles(ctx, method)
	switch {
	case err != nil:
		return err
	case retry:
		return l.answerStream(srv, ss, handler, method, id, files)
	}
	return l.runStream(srv, ss, handler, method, id, nil)
}

// answerStream answers the retry of a client stream from the ledgers
// named in files: from a completed record, from the method's resolver if
// it was interrupted in its handler, or, if no plugin had started it, by
// running it now, from the messages the host sends again, if it sends them
// all.
func (l *ledger) answerStream(srv any, ss grpc.ServerStream, handler grpc.StreamHandler, method, id, files string) error {
	ctx := ss.Context()
	sent, ok := ledgerwire.ParseSent(first(metadata.ValueFromIncomingContext(ctx, ledgerwire.SentKey)))
	if !ok {
		setTrailer(ctx, ledgerwire.Unreadable)
		return status.Errorf(codes.InvalidArgument, "ledger: the retry of stream %s of %s does not say what was sent on it: not run", id, method)
	}
	found, err := l.idx.lookup(key{id, method}, strings.Split(files, ","))
	switch {
	case err != nil:
		setTrailer(ctx, ledgerwire.Unreadable)
		return status.Errorf(codes.Unknown, "ledger: cannot read the ledgers to tell whether stream %s of %s ran, so it was not run: %v", id, method, err)
	case found.completed != nil:
		resp, how, err := replay(found.completed, method, id)
		setTrailer(ctx, how)
		if err != nil {
			return err
		}
		return ss.SendMsg(resp)
	case found.started:
		return l.interruptedStream(srv, ss, handler, method, id, sent)
	case !sent.All:
		return notReplayable(ctx, method, id, ledgerwire.NotStarted, "no plugin had started it")
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	}
	return l.runStream(srv, ss, handler, method, id, nil)
}

// interruptedStream answers a client stream that was in its handler when
// its plugin died: from its method's resolver, if it can tell, or with an
// error that says so. A resolver's Done is recorded as the stream's
// completion; its NotDone runs the stream now, if the host sends it all.
func (l *ledger) interruptedStream(srv any, ss grpc.ServerStream, handler grpc.StreamHandler, method, id string, sent ledgerwire.Sent) error {
	ctx := ss.Context()
	r := l.cfg.streams[method]
	if r == nil {
		return interruptedErr(ctx, method, id)
	}
	req, err := firstMessage(ss, method)
	if err != nil {
		if ctx.Err() != nil {
			return status.FromContextError(ctx.Err()).Err()
		}
		return interruptedErr(ctx, method, id)
	}
	u := Upload{CallID: id, Digest: sent.Digest, Length: sent.Length, Whole: sent.All}
	if _, none := req.(noMessage); req != nil && !none {
		u.First = req
	}
	switch resp, res := resolveStream(ctx, r, method, u); res {
	case Done:
		l.complete(method, id, resp, nil)
		setTrailer(ctx, ledgerwire.Resolved)
		return ss.SendMsg(resp)
	case NotDone:
		if !sent.All {
			return notReplayable(ctx, method, id, ledgerwire.NotReplayable, "its resolver found that it did not take effect")
		}
		return l.runStream(srv, ss, handler, method, id, req)
	}
	return interruptedErr(ctx, method, id)
}

// runStream runs a client stream between its records. The handler's
// response is held (heldStream) and sent once the stream's completion is
// recorded. first, if not nil, is the stream's first message, already
// received: the handler receives it first.
func (l *ledger) runStream(srv any, ss grpc.ServerStream, handler grpc.StreamHandler, method, id string, first proto.Message) error {
	if err := l.start(method, id); err != nil {
		return err
	}
	hs := &heldStream{ServerStream: ss, first: first}
	herr := handler(srv, hs)
	at(ledgerwire.AfterHandler)
	l.complete(method, id, hs.resp, herr)
	at(ledgerwire.AfterCompleted)
	if herr != nil || hs.resp == nil {
		return herr
	}
	return ss.SendMsg(hs.resp)
}

// heldStream is a client stream's ServerStream as its handler sees it: its
// response is kept (a copy, if it is a proto message, as the handler may
// reuse it once SendMsg returns) rather than sent, and its first message
// may be one received already.
type heldStream struct {
	grpc.ServerStream
	first proto.Message // received already: RecvMsg returns it first
	resp  any
}

// RecvMsg receives the next message.
func (s *heldStream) RecvMsg(m any) error {
	f := s.first
	if f == nil {
		return s.ServerStream.RecvMsg(m)
	}
	s.first = nil
	if _, none := f.(noMessage); none {
		return io.EOF
	}
	pm, ok := m.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "ledger: a client stream's first message was received as %T, and cannot be given as %T", f, m)
	}
	proto.Reset(pm)
	proto.Merge(pm, f)
	return nil
}

// SendMsg keeps the response, which is sent once the handler returned and
// its completion is recorded.
func (s *heldStream) SendMsg(m any) error {
	if s.resp != nil {
		return status.Error(codes.Internal, "ledger: a client stream's handler sent a second response")
	}
	if pm, ok := m.(proto.Message); ok && pm != nil {
		m = proto.Clone(pm)
	}
	s.resp = m
	return nil
}

// noMessage stands for the first message of a stream that had none: the
// host closed it without sending any.
type noMessage struct{ proto.Message }

// firstMessage receives a client stream's first message, decoded as its
// method's request type, which the proto registry of this process gives.
// It returns nil, nil if the host sent none, or the type is unknown here.
func firstMessage(ss grpc.ServerStream, method string) (proto.Message, error) {
	m := requestOf(method)
	if m == nil {
		return nil, nil
	}
	if err := ss.RecvMsg(m); err != nil {
		if errors.Is(err, io.EOF) {
			return noMessage{}, nil
		}
		return nil, err
	}
	return m, nil
}

// requestOf returns a new message of method's request type, or nil if the
// proto registry does not know it.
func requestOf(method string) proto.Message {
	svc, name, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if !ok {
		return nil
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	if err != nil {
		return nil
	}
	return mt.New().Interface()
}

// resolveStream asks r; a resolver that panics cannot tell, and says so on
// stderr, rather than take the plugin down with the retry.
func resolveStream(ctx context.Context, r StreamResolver, method string, u Upload) (resp any, res Resolution) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(os.Stderr, "ledger: the resolver of %s panicked on stream %s: %v\n", method, u.CallID, p)
			resp, res = nil, Unresolved
		}
	}()
	resp, res = r(ctx, method, u)
	if res == Done && resp == nil {
		return nil, Unresolved // no answer to give
	}
	return resp, res
}

// interruptedErr fails a call that was in its handler when its plugin died,
// and that no resolver could tell about.
func interruptedErr(ctx context.Context, method, id string) error {
	setTrailer(ctx, ledgerwire.Interrupted)
	return status.Errorf(codes.Unknown, "ledger: call %s of %s was in its handler when its plugin died, and whether it took effect is unknown", id, method)
}

// notReplayable fails, unrun, a client stream that did not take effect on
// a dead plugin, which the host could not send again in full.
func notReplayable(ctx context.Context, method, id, how, why string) error {
	setTrailer(ctx, how)
	return status.Errorf(codes.Unknown, "ledger: stream %s of %s did not take effect (%s), and the host could not send all of it again: not run", id, method, why)
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}
