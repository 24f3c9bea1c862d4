package redial

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/probe"
)

// exitWait bounds how long a launch whose connection failed waits for the
// plugin's process to exit, so that the error names the exit (a plugin
// that printed its address and then died is refused before it is reaped).
const exitWait = 200 * time.Millisecond

// waitReady waits until cc is READY. TRANSIENT_FAILURE or the process
// exiting means the new plugin is not serving; the error then carries the
// real cause: the process's exit and stderr tail, or the
// transport's own error (a TLS or handshake failure). The exit ends the
// wait whatever the connection does, and a connection that drops back to
// IDLE (the plugin accepted it, then died) is connected again: nothing
// else would change that state.
func waitReady(ctx context.Context, cc *grpc.ClientConn, p *Process) error {
	if p != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(p.Exited(), cancel)()
	}
	for {
		s := cc.GetState()
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure, connectivity.Shutdown:
			return notReady(ctx, cc, p, s)
		case connectivity.Idle:
			cc.Connect()
		}
		if err := exited(p); err != nil {
			return err
		}
		if !cc.WaitForStateChange(ctx, s) {
			if err := exited(p); err != nil {
				return err
			}
			return ctx.Err()
		}
	}
}

// exited returns the exit of p, with its stderr tail, if p has exited.
func exited(p *Process) error {
	if p == nil {
		return nil
	}
	return p.exitError()
}

// notReady explains a connection in state s: by the process's exit if it
// exits within exitWait, else by the transport error a fail-fast call gets.
func notReady(ctx context.Context, cc *grpc.ClientConn, p *Process, s connectivity.State) error {
	if p != nil {
		p.Await(ctx, exitWait)
		if err := exited(p); err != nil {
			return err
		}
	}
	// A fail-fast call on a connection in TRANSIENT_FAILURE fails with the
	// error of the last connection attempt, which grpc-go keeps nowhere
	// else. Health checks go where they are sent and count as no call.
	// Only a check that could not reach the plugin explains the state: an
	// answer means the connection came back meanwhile, and a check that
	// ran out of time says nothing of the transport.
	r := probe.Check(ctx, cc, "", exitWait)
	if r.Verdict.Alive() || r.Expired {
		return fmt.Errorf("connection is %v", s)
	}
	return fmt.Errorf("connection is %v: %s", s, status.Convert(r.Err).Message())
}
