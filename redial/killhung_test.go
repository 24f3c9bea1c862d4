//go:build unix

package redial_test

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial"
)

// TestKillHung: a plugin the host finds hung (here SIGSTOPped) is reported
// with EventHung, killed, its exit reported as hung-killed, and replaced;
// asked again about the retired generation, KillHung does nothing.
func TestKillHung(t *testing.T) {
	rec := &respawntest.Events{}
	rc, g1 := connected(t, newPluginHook(t), redial.WithEventHandler(rec.Add))
	pid := g1.Process().PID
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cause := errors.New("no answer for 3 checks")
	g1.KillHung(cause)

	if e := rec.Wait(t, redial.EventHung, 1, 1); !errors.Is(e.Err, cause) {
		t.Errorf("EventHung cause = %v, want %v", e.Err, cause)
	}
	waitDone(t, g1.Process().Done(), "hung plugin killed")
	if e, _ := g1.Process().Exit(); e.Signal != syscall.SIGKILL || e.Reason != "hung-killed" {
		t.Errorf("hung plugin ended with %v, want SIGKILL, hung-killed", e)
	}
	g2, err := redial.HandleOf(rc).Next(respawntest.Context(t, 20*time.Second), g1)
	if err != nil || g2.Number() != 2 {
		t.Fatalf("after KillHung: generation %v, %v; want 2", g2, err)
	}

	g1.KillHung(cause) // retired: nothing to do
	(*redial.Generation)(nil).KillHung(cause)
	if n := rc.Stats().Hung; n != 1 { // counted when emitted, not when delivered
		t.Errorf("Stats().Hung = %d, want 1", n)
	}
	if _, exited := g2.Process().Exit(); exited {
		t.Error("KillHung of a retired generation killed its successor")
	}
}
