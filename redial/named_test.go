//go:build unix

package redial_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial"
)

// TestErrorsNameThePlugin: a Conn's launch and wait errors say which plugin
// they are about, so that a host with several can tell.
func TestErrorsNameThePlugin(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		hook respawntest.RespawnerFunc
		opts []redial.Option
		ctx  time.Duration // the caller's deadline; 0: none
		is   error
	}{
		{"hook fails", func(context.Context, redial.Request) (redial.Backend, error) { return redial.Backend{}, boom }, nil, 5 * time.Second, boom},
		{"hook hangs past the respawn timeout", func(ctx context.Context, _ redial.Request) (redial.Backend, error) {
			<-ctx.Done()
			return redial.Backend{}, ctx.Err()
		}, []redial.Option{redial.WithPacing(redial.Pacing{RespawnTimeout: 50 * time.Millisecond})}, 5 * time.Second, redial.ErrRespawnTimeout},
		{"no plugin within WithMaxWait", func(ctx context.Context, _ redial.Request) (redial.Backend, error) {
			<-ctx.Done() // a start slower than any wait: it ends with the Conn
			return redial.Backend{}, boom
		}, []redial.Option{redial.WithPacing(redial.Pacing{MaxWait: 50 * time.Millisecond})}, 0, redial.ErrNoPlugin},
		{"the caller's deadline", func(ctx context.Context, _ redial.Request) (redial.Backend, error) {
			<-ctx.Done()
			return redial.Backend{}, boom
		}, nil, 50 * time.Millisecond, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := newConn(t, tc.hook, append(tc.opts, redial.WithName("objectstore"))...)
			ctx := context.Background()
			if tc.ctx > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.ctx)
				defer cancel()
			}
			err := rc.Connect(ctx)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), `plugin "objectstore"`) {
				t.Errorf("Connect: %v; want an error matching %v that names the plugin", err, tc.is)
			}
		})
	}
}
