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
// SIGKILL pending (one read of /proc/<pid>/status; a zombie leader whose
// other threads run lives). How it died is in [Process.Exit] once the exit
// is reported. No goroutine is started; a timer only when max > 0.
func (p *Process) Await(ctx context.Context, max time.Duration) (dead bool) {
	done := p.exited.Done()
	select {
	case <-done:
		return true
	default:
	}
	if max > 0 {
		t := time.NewTimer(max)
		select {
		case <-done:
			t.Stop()
			return true
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	select {
	case <-done:
		return true
	default:
	}
	if p.pid <= 0 {
		return false
	}
	_, dying := procfs.Dying(p.pid)
	return dying
}
