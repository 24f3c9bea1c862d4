package command_test

import (
	"os"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial/command"
)

// TestIdleConnGoroutines: while an idle Conn's plugin, launched by
// Command, runs, redial waits for it with one goroutine, its I/O loop;
// besides grpc-go's own for the connection and the launcher thread's
// goroutine (one for all plugins), nothing else waits: no
// reaper, stdout reader or exit watcher of redial's, no stderr copier of
// os/exec's. Before, there were those five.
func TestIdleConnGoroutines(t *testing.T) {
	before := goleak.IgnoreCurrent()
	rc := respawntest.NewConn(t, &command.Hook{Path: plugintest.BuildOnce(t), Stderr: os.Stderr})
	if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	const loop = "github.com/grpc-respawn/respawn/redial/internal/proc.(*ioLoop).run"
	// goleak retries, boundedly, while the launch's own goroutines end.
	err := goleak.Find(before,
		goleak.IgnoreAnyFunction(loop),
		// The one goroutine, for all plugins, that keeps the thread they
		// were forked from (their parent-death signal follows it).
		goleak.IgnoreAnyFunction("github.com/grpc-respawn/respawn/redial/internal/proc.runLauncher"),
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/transport.(*http2Client).reader"),
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/transport.(*loopyWriter).run"))
	if err != nil {
		t.Errorf("goroutines besides the I/O loop and grpc-go's wait for an idle Conn: %v", err)
	}
	var dump strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&dump, 2)
	if n := strings.Count(dump.String(), loop); n != 1 {
		t.Errorf("%d I/O loops for one plugin, want 1", n)
	}
}
