package goplugin_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn/internal/goplugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// pushConfig is a host's set-up call, like Velero's Init(config): state the
// plugin keeps in memory, which its successor must be given again.
func pushConfig(ctx context.Context, cp plugin.ClientProtocol) error {
	raw, err := cp.Dispense(goplugintest.Name)
	if err != nil {
		return err
	}
	_, err = raw.(testpb.TestClient).Put(ctx, &testpb.PutRequest{Key: "config", Value: "v1"})
	return err
}

func TestInitReplaysState(t *testing.T) {
	for _, tc := range []struct {
		name    string
		failure func() error // what the first re-init does instead of succeeding
	}{
		{"re-init succeeds", nil},
		{"re-init fails once", func() error { return errors.New("init refused") }},
		{"re-init panics once", func() error { panic("init exploded") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var inits atomic.Int32
			init := func(ctx context.Context, cp plugin.ClientProtocol) error {
				// Launch 1 is the first plugin, launch 2 the first respawn.
				if inits.Add(1) == 2 && tc.failure != nil {
					return tc.failure()
				}
				return pushConfig(ctx, cp)
			}
			h := newHost(t, setup{init: init})
			checkConfig(t, h, "first plugin")
			g1 := h.rc.Current()
			respawntest.Kill(t, g1)

			resp := checkConfig(t, h, "after the kill")
			if resp.GetPid() == int64(g1.Process().PID) {
				t.Errorf("answered by the killed plugin")
			}
			st := h.rc.Stats()
			wantFailed, wantInits := uint64(0), int32(2)
			if tc.failure != nil {
				wantFailed, wantInits = 1, 3
			}
			if st.Respawns != 1 || st.FailedRespawns != wantFailed {
				t.Errorf("respawns %d, failed respawns %d; want 1 and %d", st.Respawns, st.FailedRespawns, wantFailed)
			}
			if got := inits.Load(); got != wantInits {
				t.Errorf("init ran %d times, want %d", got, wantInits)
			}
			if tc.failure != nil {
				e, ok := h.events.Find(redial.EventRespawnDone, 2)
				if !ok || e.Err == nil || !strings.Contains(e.Err.Error(), "init of plugin 2") {
					t.Errorf("first respawn: %v, want a failure naming the init", e.Err)
				}
			}
		})
	}
}

// checkConfig fails the test unless the current plugin holds the config
// pushed by init, read through the stub dispensed once.
func checkConfig(t *testing.T, h *host, when string) *testpb.GetResponse {
	t.Helper()
	resp, err := h.client.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{Key: "config"})
	if err != nil {
		t.Fatalf("%s: Get config: %v", when, err)
	}
	if !resp.GetFound() || resp.GetValue() != "v1" {
		t.Fatalf("%s: config = %q (found %v), want %q", when, resp.GetValue(), resp.GetFound(), "v1")
	}
	return resp
}

// TestInitRunsAtPromotion: with a standby, a spare's init runs when it is
// promoted, not when it is launched, and the promoted spare holds the
// config.
func TestInitRunsAtPromotion(t *testing.T) {
	var inits atomic.Int32
	init := func(ctx context.Context, cp plugin.ClientProtocol) error {
		inits.Add(1)
		return pushConfig(ctx, cp)
	}
	h := newHost(t, setup{
		init:  init,
		ropts: []redial.Option{redial.WithPacing(redial.Pacing{Spares: 1})},
	})
	checkConfig(t, h, "first plugin")
	spare := h.events.WaitFor(t, "spare ready", respawntest.SpareReady, 1).Exit.PID
	if got := inits.Load(); got != 1 {
		t.Fatalf("init ran %d times with a spare ready, want 1: a spare's init waits for its promotion", got)
	}
	respawntest.Kill(t, h.rc.Current())
	resp := checkConfig(t, h, "after the kill")
	if got := int(resp.GetPid()); got != spare {
		t.Errorf("answered by pid %d, want the spare's %d", got, spare)
	}
	if got := inits.Load(); got != 2 {
		t.Errorf("init ran %d times, want 2 (the first plugin, the promoted spare)", got)
	}
	if st := h.rc.Stats(); st.SparesTaken != 1 {
		t.Errorf("SparesTaken = %d, want 1", st.SparesTaken)
	}
}
