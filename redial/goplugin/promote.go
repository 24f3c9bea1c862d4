package goplugin

import (
	"context"
	"errors"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/redial"
)

// initUnlessSpare runs Init on a plugin launched to serve
// at once; a spare's init waits for its promotion (the Backend's Promote).
func (h *Hook) initUnlessSpare(ctx context.Context, cp plugin.ClientProtocol, req redial.Request) error {
	if req.Spare {
		return nil
	}
	return h.runInit(ctx, cp)
}

// promote runs Init on a spare (redial.Pacing.Spares),
// whose connection is cc, when redial promotes it to the current plugin
// (the spare's Backend.Promote), not when it was launched: so the state
// the host replays is the state at promotion, never the state of the time
// the spare was started. It is on the recovery's critical path, and costs
// what the init's calls cost. If init fails or panics, the spare is
// discarded and redial launches a plugin instead (whose init runs at
// launch).
func (h *Hook) promote(ctx context.Context, cc *grpc.ClientConn) error {
	h.mu.Lock()
	client := h.clients[cc]
	h.mu.Unlock()
	if client == nil {
		return errors.New("goplugin: promote: the spare is stopped")
	}
	cp, err := client.Client() // the protocol client Respawn created
	if err != nil {
		return err
	}
	return h.runInit(ctx, cp)
}
