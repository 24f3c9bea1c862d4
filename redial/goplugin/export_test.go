package goplugin

import (
	"context"

	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn/redial"
)

// The hook behind Connect, for tests that build a Conn around it by hand
// (to wrap it, or to give it to redial.New with a policy of their own).
type (
	Hook   = hook
	Option = option
)

var (
	New             = newHook
	WithInit        = withInit
	WithStopGrace   = withStopGrace
	WithStopTimeout = withStopTimeout
)

// Client is client, for tests.
func (h *hook) Client(g *redial.Generation) *plugin.Client { return h.client(g) }

// Dispense is dispense, for tests.
func (h *hook) Dispense(ctx context.Context, rc *redial.Conn, name string) (any, error) {
	return h.dispense(ctx, rc, name)
}
