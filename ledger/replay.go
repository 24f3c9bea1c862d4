package ledger

import (
	"context"
	"fmt"
	"os"
	"strings"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
)

// appendCompleted appends the frame of a call's completed record: its
// status (as grpc-go will send it) and, for a success, its response if it
// is a proto message no larger than MaxResponse.
func (l *ledger) appendCompleted(b []byte, id, method string, resp any, herr error) []byte {
	start := len(b)
	b = ledgerwire.BeginFrame(b)
	if herr != nil {
		s, ok := status.FromError(herr)
		if !ok {
			s = status.FromContextError(herr) // as grpc-go's server does
		}
		st, err := proto.Marshal(s.Proto())
		if err != nil {
			st, _ = proto.Marshal(status.New(s.Code(), s.Message()).Proto())
		}
		b = appendCompletedHead(b, id, method, false, st)
		return ledgerwire.FinishFrame(b, start)
	}
	m := l.keepable(resp)
	if m == nil {
		b = appendCompletedHead(b, id, method, false, nil)
		return ledgerwire.FinishFrame(b, start)
	}
	b = appendCompletedHead(b, id, method, true, nil)
	b = appendString(b, string(m.ProtoReflect().Descriptor().FullName()))
	b, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, m)
	if err != nil {
		b = ledgerwire.BeginFrame(b[:start])
		b = appendCompletedHead(b, id, method, false, nil)
	}
	return ledgerwire.FinishFrame(b, start)
}

// keepable returns resp as a message the record can keep, or nil. It
// leaves resp's size cached, for MarshalAppend. A typed nil message is
// kept: grpc-go sends it as an empty message, zero bytes, and so does its
// replay.
func (l *ledger) keepable(resp any) proto.Message {
	m, ok := resp.(proto.Message)
	if !ok || m == nil || l.cfg.maxResponse < 0 {
		return nil
	}
	if proto.Size(m) > l.cfg.maxResponse {
		return nil
	}
	return m
}

// answer answers a retry from the ledgers, if they have a record of it:
// answered is false when they have none and the call is to run now.
func (l *ledger) answer(ctx context.Context, method, id string, req any, files string) (resp any, answered bool, err error) {
	found, err := l.idx.lookup(key{id, method}, strings.Split(files, ","))
	if err != nil {
		setTrailer(ctx, ledgerwire.Unreadable)
		return nil, true, status.Errorf(codes.Unknown, "ledger: cannot read the ledgers to tell whether call %s of %s ran, so it was not run: %v", id, method, err)
	}
	switch {
	case found.completed != nil:
		resp, how, err := replay(found.completed, method, id)
		setTrailer(ctx, how)
		return resp, true, err
	case found.started:
		resp, err := l.interrupted(ctx, method, id, req)
		return resp, true, err
	}
	return nil, false, nil
}

func setTrailer(ctx context.Context, how string) {
	_ = grpc.SetTrailer(ctx, metadata.Pairs(ledgerwire.TrailerKey, how))
}

// replay returns the recorded answer of a completed call, and the trailer
// value that says how it was answered.
func replay(r *record, method, id string) (resp any, how string, err error) {
	var sp spb.Status
	if err := proto.Unmarshal(r.status, &sp); err != nil {
		return nil, ledgerwire.ResponseLost, lost(method, id, "its status cannot be decoded")
	}
	if st := status.FromProto(&sp); st.Code() != codes.OK {
		return nil, ledgerwire.Replayed, st.Err()
	}
	if !r.kept {
		return nil, ledgerwire.ResponseLost, lost(method, id, "its response was not kept (over MaxResponse, or not a proto message)")
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(r.respType))
	if err != nil {
		return nil, ledgerwire.ResponseLost, lost(method, id, "its response's type "+r.respType+" is not registered in this plugin")
	}
	m := mt.New().Interface()
	if err := proto.Unmarshal(r.resp, m); err != nil {
		return nil, ledgerwire.ResponseLost, lost(method, id, "its response cannot be decoded")
	}
	return m, ledgerwire.Replayed, nil
}

func lost(method, id, why string) error {
	return status.Errorf(codes.DataLoss, "ledger: call %s of %s completed once, but %s: the response is gone", id, method, why)
}

// interrupted answers a call that was in its handler when its plugin died:
// from its method's resolver, if it knows, or with an error that says so.
// A resolver's answer is recorded as the call's completion.
func (l *ledger) interrupted(ctx context.Context, method, id string, req any) (any, error) {
	if r := l.cfg.resolvers[method]; r != nil {
		if resp, known := resolve(ctx, r, method, id, req); known {
			l.complete(method, id, resp, nil)
			setTrailer(ctx, ledgerwire.Resolved)
			return resp, nil
		}
	}
	return nil, interruptedErr(ctx, method, id)
}

// resolve asks r; a resolver that panics cannot tell, and says so on
// stderr, rather than take the plugin down with the retry.
func resolve(ctx context.Context, r func(context.Context, string, string, any) (any, bool), method, id string, req any) (resp any, known bool) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(os.Stderr, "ledger: the resolver of %s panicked on call %s: %v\n", method, id, p)
			resp, known = nil, false
		}
	}()
	return r(ctx, method, id, req)
}
