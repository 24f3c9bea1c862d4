package goplugin_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn/internal/goplugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/goplugin"
)

func TestRespawnRejectsWhatItCannotRespawn(t *testing.T) {
	started := exec.Command("true")
	if err := started.Run(); err != nil {
		t.Fatal(err)
	}
	config := func(edit func(*plugin.ClientConfig)) func() *plugin.ClientConfig {
		return func() *plugin.ClientConfig {
			cfg := goplugintest.Config("/nonexistent/plugin", "")
			edit(cfg)
			return cfg
		}
	}
	for _, tc := range []struct {
		name string
		hook *goplugin.Hook
		want string
	}{
		{"zero Hook", &goplugin.Hook{}, "no Client config func"},
		{"config func returns nil", &goplugin.Hook{Client: func() *plugin.ClientConfig { return nil }}, "returned nil"},
		{"Reattach", &goplugin.Hook{Client: config(func(c *plugin.ClientConfig) { c.Cmd, c.Reattach = nil, &plugin.ReattachConfig{} })}, "Reattach"},
		{"no Cmd", &goplugin.Hook{Client: config(func(c *plugin.ClientConfig) { c.Cmd = nil })}, "Cmd is nil"},
		{"Cmd already started", &goplugin.Hook{Client: config(func(c *plugin.ClientConfig) { c.Cmd = started })}, "already started"},
		{"binary missing", &goplugin.Hook{Client: config(func(*plugin.ClientConfig) {})}, "start plugin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.hook.Respawn(respawntest.Context(t, 10*time.Second), redial.Request{Generation: 1})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Respawn: got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
