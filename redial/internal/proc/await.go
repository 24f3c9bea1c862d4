package proc

import (
	"context"
	"time"

	"github.com/grpc-respawn/respawn/internal/procfs"
)

// Await waits for the exit of p, at most max and until ctx ends, and
// reports whether p is dead. It is the one bounded wait for an exit: it
// returns true once the exit is reported; if the report has not come when
// max has passed (at once for max <= 0), it asks the kernel, which knows
// at once what the reaper, a goroutine of the host, reports late on a
// loaded host: on Linux, p is dead if it is a zombie, reaped, or has a
// SIGKILL pending (one read of /proc/<pid>/status, through the file held
// open for a process this package started; a zombie leader whose other
// threads run lives). How it died is in [Process.Exit] once the exit
// is reported. No goroutine is started; a timer only when max > 0. A nil
// Process never exits: it waits out max or ctx, and is not dead.
func (p *Process) Await(ctx context.Context, max time.Duration) (dead bool) {
	var done <-chan struct{} // a nil Process never exits: it waits out max
	if p != nil {
		done = p.exited.Done()
	}
	if max > 0 && !p.Ended() {
		t := time.NewTimer(max)
		select {
		case <-done:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	switch {
	case p.Ended():
		return true
	case p == nil || p.pid <= 0:
		return false
	}
	var dying bool
	if p.status != nil {
		_, dying = p.status.Dying()
	} else {
		_, dying = procfs.Dying(p.pid)
	}
	return dying || p.Ended() // reported, and its status closed, meanwhile
}
