package command_test

import (
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// TestCommandPluginDiesWithItsHost: a host that is SIGKILLed (no Close)
// takes its plugin with it. Before, the plugin ran on, reparented, with
// its private socket dir.
func TestCommandPluginDiesWithItsHost(t *testing.T) {
	if respawntest.IsHost() {
		b, err := (&command.Hook{Path: plugintest.BuildOnce(t), Stderr: os.Stderr}).Respawn(respawntest.Context(t, 20*time.Second), redial.Request{Generation: 1})
		if err != nil {
			t.Fatal(err)
		}
		respawntest.ServeAsHost(t, b.Process.PID)
		return
	}
	respawntest.WaitDead(t, respawntest.KillHost(t, "^TestCommandPluginDiesWithItsHost$"))
}

// TestPluginOutlivesTheThreadThatStartedIt: a plugin launched from a
// goroutine that locks its OS thread and returns, which ends the thread,
// lives on. Linux sends the parent-death signal when the thread that
// forked a child ends: a plugin forked on the caller's thread would die
// with it.
func TestPluginOutlivesTheThreadThatStartedIt(t *testing.T) {
	cmd := &command.Hook{Path: plugintest.BuildOnce(t), Stderr: os.Stderr}
	type launched struct {
		b   redial.Backend
		err error
		tid int
	}
	ch := make(chan launched, 1)
	launch := func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if tid := unix.Gettid(); tid == unix.Getpid() {
			// The main thread, which Go never ends: try another.
			runtime.UnlockOSThread()
			ch <- launched{tid: tid}
			return
		}
		b, err := cmd.Respawn(respawntest.Context(t, 20*time.Second), redial.Request{Generation: 1})
		ch <- launched{b, err, unix.Gettid()}
	}
	var l launched
	for l.tid = unix.Getpid(); l.tid == unix.Getpid(); l = <-ch {
		go launch()
	}
	if l.err != nil {
		t.Fatal(l.err)
	}
	defer l.b.Stop()
	// The thread is gone from /proc once it has ended, and with it sent
	// the signal to the children it forked.
	respawntest.WaitDead(t, l.tid)
	if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(l.tid)); !os.IsNotExist(err) {
		t.Fatalf("thread %d still there: %v", l.tid, err)
	}
	respawntest.WantServedBy(t, l.b.Target, l.b.Process.PID)
	if e, exited := l.b.Process.Exit(); exited {
		t.Errorf("the plugin died with the thread that started it: %v", e)
	}
}
