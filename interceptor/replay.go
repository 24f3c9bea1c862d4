package interceptor

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	"github.com/grpc-respawn/respawn/redial"
)

// openOn opens a new attempt on g and sends again what was sent; mu is
// held. It returns the attempt, and its error if that fails.
func (s *clientStream) openOn(g *redial.Generation) (attempt, error) {
	s.endLocked()
	actx, cancel := attemptContext(withAttempt(s.ctx, s.r.attempt-1), g)
	s.a, s.cancel, s.n = attempt{g: g, actx: actx, pr: new(peer.Peer)}, cancel, s.n+1
	s.settled.done()
	cs, err := s.streamer(actx, s.desc, g.ClientConn(), s.method, retryOptions(s.opts, s.a.pr)...)
	if err == nil {
		err = s.replayLocked(cs)
	}
	if err != nil {
		return s.a, err
	}
	s.attemptLocked(cs)
	return s.a, nil
}

// commitLocked commits the stream if e does (see [commitTable]): it drops
// the replay log, and the call will not be sent again.
func (s *clientStream) commitLocked(e streamEvent) {
	if !commits(s.desc, e) {
		return
	}
	s.committed = true
	s.dropSentLocked()
	s.settled.done()
}

// openOn opens a retry attempt on g and replays what was sent. If that
// fails it returns the attempt, ended, and its error.
func (s *stream) openOn(g *redial.Generation) (attempt, error) {
	actx, cancel := attemptContext(withAttempt(s.ctx, s.r.attempt-1), g)
	a := attempt{g: g, actx: actx, pr: new(peer.Peer)}
	cs, err := s.streamer(actx, s.desc, g.ClientConn(), s.method, retryOptions(s.opts, a.pr)...)
	if err == nil {
		if err = s.replay(cs, g); err == nil {
			s.actx, s.cancel, s.pr = actx, cancel, a.pr
			return a, nil
		}
	}
	cancel() // ends cs too, if the replay failed
	return a, err
}

// replay sends the request (and CloseSend) again on cs and makes cs current.
func (s *stream) replay(cs grpc.ClientStream, g *redial.Generation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.replayLocked(cs); err != nil {
		return err
	}
	s.g = g
	s.attemptLocked(cs)
	return nil
}
