package goplugin

import (
	"context"
	"errors"

	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn/redial"
)

var _ redial.Promoter = (*Hook)(nil)

// initUnlessSpare runs the WithInit function on a plugin launched to serve
// at once; a spare's init waits for its promotion ([Hook.Promote]).
func (h *Hook) initUnlessSpare(ctx context.Context, cp plugin.ClientProtocol, req redial.Request) error {
	if req.Spare {
		return nil
	}
	return h.runInit(ctx, cp)
}

// Promote runs the [WithInit] function on a spare (redial.WithStandby) when
// redial promotes it to the current plugin, not when it was launched: so
// the state the host replays is the state at promotion, never the state
// of the time the spare was started. It is on the recovery's critical
// path, and costs what the init's calls cost. If init fails or panics, the
// spare is discarded and redial launches a plugin instead (whose init runs
// at launch). Without WithInit it does nothing. redial calls it; a host
// does not.
func (h *Hook) Promote(ctx context.Context, b redial.Backend) error {
	if h == nil || h.opts.init == nil {
		return nil
	}
	h.mu.Lock()
	client := h.clients[b.Conn]
	h.mu.Unlock()
	if client == nil {
		return errors.New("goplugin: Promote: the spare was not launched by this Hook, or is stopped")
	}
	cp, err := client.Client() // the protocol client Respawn created
	if err != nil {
		return err
	}
	return h.runInit(ctx, cp)
}
