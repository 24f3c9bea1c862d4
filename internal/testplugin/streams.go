package testplugin

import (
	"io"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/testpb"
)

// Watch sends the messages with seq From..Count-1, sleeping DelayMs before
// the first and IntervalMs between consecutive ones.
func (s *Server) Watch(req *testpb.WatchRequest, stream grpc.ServerStreamingServer[testpb.WatchResponse]) error {
	ctx := stream.Context()
	if err := s.sendHeader(stream); err != nil {
		return err
	}
	if err := s.started(ctx, req.GetId(), req.GetDelayMs()); err != nil {
		return err
	}
	for seq := req.GetFrom(); seq < req.GetCount(); seq++ {
		if seq > req.GetFrom() {
			if err := sleep(ctx, req.GetIntervalMs()); err != nil {
				return err
			}
		}
		if err := stream.Send(&testpb.WatchResponse{Pid: s.pid, Id: req.GetId(), Seq: seq}); err != nil {
			return err
		}
	}
	return nil
}

// Collect receives a client stream: it journals the first message's id,
// waits each message's delay, and answers with the count once the client
// closes its side, or once it has CollectAnswerAfter messages.
func (s *Server) Collect(stream grpc.ClientStreamingServer[testpb.CollectRequest, testpb.CollectResponse]) error {
	if err := s.sendHeader(stream); err != nil {
		return err
	}
	var id string
	var n int64
	var seqs []string
	answer := func() error {
		if s.journal != "" && id != "" {
			if err := appendLine(s.journal+ReceivedSuffix, id+" "+strings.Join(seqs, ",")); err != nil {
				return status.Errorf(codes.Internal, "journal: %v", err)
			}
		}
		return stream.SendAndClose(&testpb.CollectResponse{Pid: s.pid, Id: id, Count: n})
	}
	for {
		if n > 0 && n == s.CollectAnswerAfter {
			return answer()
		}
		if n > 0 && n == s.CollectRefuseAfter {
			return status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`)
		}
		req, err := stream.Recv()
		if err == io.EOF {
			return answer()
		}
		if err != nil {
			return err
		}
		seqs = append(seqs, strconv.FormatInt(req.GetSeq(), 10))
		if n == 0 {
			id = req.GetId()
			if err := s.recordCall(stream.Context(), id); err != nil {
				return status.Errorf(codes.Internal, "journal: %v", err)
			}
		}
		n++
		if err := sleep(stream.Context(), req.GetDelayMs()); err != nil {
			return err
		}
	}
}

// Echo answers each message of a bidirectional stream, after its delay,
// with its seq; it journals the first message's id. It ends the stream
// once the client closes its side, or once it has answered EchoEndAfter.
func (s *Server) Echo(stream grpc.BidiStreamingServer[testpb.EchoRequest, testpb.EchoResponse]) error {
	if err := s.sendHeader(stream); err != nil {
		return err
	}
	var id string
	for n := int64(0); ; n++ {
		if n > 0 && n == s.EchoEndAfter {
			if err := s.record(id + "/ended"); err != nil {
				return status.Errorf(codes.Internal, "journal: %v", err)
			}
			stream.SetTrailer(metadata.Pairs("echoed", strconv.FormatInt(n, 10)))
			return status.Errorf(codes.Aborted, "echo: ended after %d messages", n)
		}
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if n == 0 {
			id = req.GetId()
			if err := s.recordCall(stream.Context(), id); err != nil {
				return status.Errorf(codes.Internal, "journal: %v", err)
			}
		}
		if err := sleep(stream.Context(), req.GetDelayMs()); err != nil {
			return err
		}
		if err := stream.Send(&testpb.EchoResponse{Pid: s.pid, Id: req.GetId(), Seq: req.GetSeq()}); err != nil {
			return err
		}
	}
}

// sendHeader sends the header "pid: <pid>" at once, with HeaderPID.
func (s *Server) sendHeader(stream grpc.ServerStream) error {
	if !s.HeaderPID {
		return nil
	}
	return stream.SendHeader(metadata.Pairs("pid", strconv.FormatInt(s.pid, 10)))
}
