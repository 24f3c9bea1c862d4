package redial

import (
	"context"

	"google.golang.org/grpc"
)

// A Respawner starts a fresh plugin and tells redial how to reach it. It is
// the hook a host plugs in: package command's Hook execs a binary, and
// package goplugin's launches a hashicorp/go-plugin client.
//
// Respawn runs detached from any one caller, under the Conn's respawn timeout:
// it must return when ctx is done. A Conn calls it for one respawn at a time,
// but a call that ignores ctx is abandoned when the timeout ends and may
// still be running when the next respawn calls it again.
type Respawner interface {
	Respawn(ctx context.Context, req Request) (Backend, error)
}

// RespawnerFunc adapts an ordinary function to a [Respawner].
type RespawnerFunc func(ctx context.Context, req Request) (Backend, error)

// Respawn calls f(ctx, req).
func (f RespawnerFunc) Respawn(ctx context.Context, req Request) (Backend, error) {
	return f(ctx, req)
}

var _ Respawner = RespawnerFunc(nil)

// Request says what a respawn is for.
type Request struct {
	// Generation is the number the new plugin will have; the first is 1.
	Generation uint64
	// Cause is the failure that condemned the previous plugin, nil for the
	// first launch.
	Cause error
	// DialOptions are the Conn's dial options for a hook that dials the
	// plugin itself: those given to [WithDialOptions], then those of the
	// call policy (its interceptors, bound to this Conn), and not redial's
	// default insecure credentials, which are for Targets only. A Respawner
	// that dials the plugin itself, rather than returning a Target, must
	// include them, after its own, so that the host's interceptors run and
	// calls made on the connection it returns are classified, rerouted and
	// retried too. The slice is the hook's to keep, not to modify.
	DialOptions []grpc.DialOption
	// Spare is set when the plugin is launched as a spare ([WithStandby]):
	// Generation is then 0, since its number is given when it is promoted,
	// which may be much later or never.
	Spare bool
}

// Backend is what a [Respawner] returns: a started plugin and either a
// connection to it or a target for redial to dial.
type Backend struct {
	// Conn, if non-nil, is a connection the hook dialled itself (for
	// instance go-plugin's). redial closes it when the plugin is retired.
	// Its credentials are the hook's choice and responsibility: redial
	// neither adds nor checks any.
	Conn *grpc.ClientConn
	// Target is dialled with the Conn's dial options when Conn is nil, for
	// instance "unix:///tmp/plugin-123/plugin.sock".
	Target string
	// Process, if non-nil, is the plugin's process. redial reports its exit
	// as an event, stops waiting out the grace period of a retired plugin
	// once it has exited, and health checks can kill it when it hangs.
	Process *Process
	// Stop, if non-nil, releases the plugin once redial is done with it:
	// it kills the process if it still runs, reaps it and removes its
	// socket. It is called exactly once, also for a Backend that redial
	// could not use (a dial failure, a respawn that timed out).
	Stop func() error
	// Promote, if non-nil, is called when the plugin, launched as a spare
	// ([WithStandby], Request.Spare), becomes the current plugin: for
	// instance to replay host state into it then, so that a spare never
	// serves state that went stale while it waited. redial calls it before
	// any call is sent to the plugin, under the respawn timeout; if it
	// fails, the spare is discarded and a plugin launched instead. It runs
	// on the critical path of the recovery: it should be quick. It is
	// never called for a plugin launched to serve at once.
	Promote func(ctx context.Context) error
}

// stop releases the plugin and closes its connection. A connection redial
// dialled itself (to Target) is closed first, so that our own open streams
// do not hold up a plugin that Stop asks to exit gracefully; a hook's own
// Conn is closed after Stop, which may need it (go-plugin's Shutdown RPC).
// Only Stop's error is returned: closing a connection that the hook's Stop
// closed already fails, harmlessly.
func (b Backend) stop() error {
	dialled := b.Target != "" && b.Conn != nil
	if dialled {
		_ = b.Conn.Close()
	}
	var err error
	if b.Stop != nil {
		err = b.Stop()
	}
	if b.Conn != nil && !dialled {
		_ = b.Conn.Close()
	}
	return err
}
