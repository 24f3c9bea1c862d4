package goplugin

import (
	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn/redial"
)

// ClientOf is client, for tests that Kill or watch go-plugin's client of
// a plugin.
func (h *Hook) ClientOf(g *redial.Generation) *plugin.Client { return h.client(g) }
