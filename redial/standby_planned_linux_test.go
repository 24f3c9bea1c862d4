package redial_test

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// TestStandbyPlannedChecksSpare: a planned replacement, by Rotate or by
// Pacing.Recycle, asks the spare whether it serves before it retires the
// healthy plugin: a SIGSTOPped spare fails its health check, is discarded,
// and a fresh plugin is launched in its place, so that calls go on being
// answered.
func TestStandbyPlannedChecksSpare(t *testing.T) {
	for _, tt := range []struct {
		name   string
		opts   []redial.Option
		rotate func(t *testing.T, rc *redial.Conn)
	}{
		{"Rotate", nil, func(t *testing.T, rc *redial.Conn) {
			if err := rc.Rotate(respawntest.Context(t, 20*time.Second)); err != nil {
				t.Fatalf("Rotate: %v", err)
			}
		}},
		{"Pacing.Recycle", []redial.Option{redial.WithPacing(redial.Pacing{Recycle: redial.Recycle{Calls: 1}})}, func(t *testing.T, rc *redial.Conn) {
			ctx := respawntest.Context(t, 20*time.Second)
			g := rc.Current()
			if _, err := testpb.NewTestClient(rc).Get(ctx, &testpb.GetRequest{}); err != nil { // the call that reaches the limit
				t.Fatal(err)
			}
			if _, err := redial.HandleOf(rc).Next(ctx, g); err != nil {
				t.Fatalf("Next: %v", err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := &spareHook{pluginHook: newPluginHook(t)}
			rec := &respawntest.Events{}
			opts := append([]redial.Option{redial.WithPacing(redial.Pacing{GracePeriod: 50 * time.Millisecond})}, tt.opts...)
			rc, pids := standbyConn(t, h, rec, 1, opts...)
			g1 := rc.Current()
			stop(t, pids[0])
			tt.rotate(t, rc)
			rec.WaitFor(t, "rotated", respawntest.Rotated, 1)
			g := rc.Current()
			if g == g1 || g.Process().PID == pids[0] {
				t.Fatalf("current plugin pid %d after the rotation, want a fresh one (not %d, nor the stopped spare %d)", g.Process().PID, g1.Process().PID, pids[0])
			}
			e := rec.WaitFor(t, "spare wasted", respawntest.SpareWasted, 1)
			wantContains(t, e.Err, "health check")
			resp, err := testpb.NewTestClient(rc).Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{})
			if err != nil || resp.GetPid() != int64(g.Process().PID) {
				t.Fatalf("Get after the rotation: %v, pid %d; want answered by the new plugin %d", err, resp.GetPid(), g.Process().PID)
			}
		})
	}
}

// stop SIGSTOPs pid, a child of the test, and waits until it is stopped: a
// thread running when the signal comes may go on for a moment.
func stop(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WNOWAIT, nil)
		if err == nil {
			return
		}
		if !errors.Is(err, unix.EINTR) {
			t.Fatalf("waiting for pid %d to stop: %v", pid, err)
		}
	}
}
