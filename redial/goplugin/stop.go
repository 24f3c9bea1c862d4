package goplugin

import (
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

// abandon SIGKILLs the plugin of a launch given up on, recording the stop
// as an abandoned launch.
func (l *launch) abandon() {
	if p := l.process(); p != nil {
		p.MarkStopping(proc.Abandoned)
		_ = p.Stop()
	}
}

// fail stops a launch that failed after go-plugin connected to its plugin,
// and returns err with the plugin's exit, so that redial reports the exit
// of a process it never saw.
func (l *launch) fail(err error) error {
	_ = l.stop()
	if ee := proc.ExitErrorOf(l.process()); ee != nil {
		return fmt.Errorf("%w: %w", err, ee)
	}
	return err
}

// stop asks a live plugin to exit, through go-plugin's Client.Kill (its
// controller's Shutdown RPC, then up to 2s for the exit), and SIGKILLs the
// plugin's process group if it has not exited within l.grace; Client.Kill
// then cleans up: closes the connection, ends its goroutines, removes its
// socket dir. A plugin that has already exited is not asked: Client.Kill
// would send it Shutdown and, finding its connection closed, log into the
// host's logger that the plugin failed to exit gracefully; go-plugin's
// client is released instead (see release). stop never blocks for more
// than l.timeout; it runs once, later calls return the first result.
func (l *launch) stop() error {
	l.once.Do(func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			l.halt()
			// Kill removes the dir only if the process started.
			if dir := l.socketDir.Load(); dir != nil && *dir != "" {
				_ = os.RemoveAll(*dir)
			}
		}()
		t := time.NewTimer(l.timeout)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			l.err = fmt.Errorf("goplugin: plugin not stopped within %v; the clean-up goes on in the background", l.timeout)
		}
	})
	return l.err
}

// halt ends the plugin and go-plugin's client of it.
func (l *launch) halt() {
	p := l.process()
	if p == nil { // nothing started: Kill has nothing to ask or kill
		l.client.Kill()
		return
	}
	exited := p.Abandon() // unless redial said why first, or it is dying
	if !exited && l.grace > 0 {
		// A hung plugin does not answer Shutdown; this ends the RPC too.
		kill := time.AfterFunc(l.grace, func() { _ = p.Stop() })
		defer kill.Stop()
		l.client.Kill()
		return
	}
	_ = p.Stop() // nothing left to ask, or no time to
	<-p.Done()
	l.release()
}

// release lets go of go-plugin's client of a plugin that has exited,
// without sending it anything: the gRPC connection is closed first, so
// that the Shutdown the protocol client's Close sends fails at once,
// unsent; the broker's and stdio's streams end with it. Then it waits
// until go-plugin has read the plugin's pipes to the end and collected its
// exit (the runner's Wait), as Client.Kill would.
func (l *launch) release() {
	if gc, ok := l.proto.(*plugin.GRPCClient); ok {
		_ = gc.Conn.Close()
	}
	if l.proto != nil {
		_ = l.proto.Close()
	}
	if r := l.runner.Load(); r != nil {
		<-r.waited
	}
}
