//go:build unix

package health_test

import (
	"context"
	"fmt"
	"log"
	"syscall"
	"time"

	"github.com/grpc-respawn/respawn"
	"github.com/grpc-respawn/respawn/health"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// A plugin that dies while nobody calls it is replaced at once, so the next
// call does not pay for the respawn.
func Example() {
	respawned := make(chan uint64, 1)
	rc, err := respawn.New(&command.Hook{Path: pluginPath},
		respawn.WithHealth(health.Config{Interval: time.Second, Timeout: time.Second}),
		respawn.WithConn(redial.WithEventHandler(func(e redial.Event) {
			if e.Kind == redial.EventRespawnDone && e.Err == nil && e.Generation > 1 {
				select { // an event handler must never block
				case respawned <- e.Generation:
				default:
				}
			}
		})))
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := rc.Connect(ctx); err != nil {
		log.Fatal(err)
	}

	// Something outside the host kills the plugin: the OOM killer, say.
	_ = syscall.Kill(rc.Current().Process().PID, syscall.SIGKILL)
	select {
	case g := <-respawned:
		fmt.Println("plugin respawned as generation", g)
	case <-ctx.Done():
		fmt.Println("no respawn")
	}
	// Output: plugin respawned as generation 2
}
