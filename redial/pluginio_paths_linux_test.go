package redial

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStartPathsKeepOneContract: the I/O loop and both of its fallbacks
// (a goroutine each, for want of pidfds; the same once the plugin has
// started, for want of an epoll instance) deliver the address line, have
// the plugin's last stderr words by the time its exit is reported, and
// kill what is left of its group at that exit. Only the I/O loop runs in
// the other tests here.
func TestStartPathsKeepOneContract(t *testing.T) {
	starters := map[string]func(*exec.Cmd, *Tail) (*started, error){
		"I/O loop": func(cmd *exec.Cmd, tail *Tail) (*started, error) { return startPlugin(cmd, tail) },
		"goroutines": func(cmd *exec.Cmd, tail *Tail) (*started, error) {
			return startWithGoroutines(cmd, tail)
		},
		"no epoll": func(cmd *exec.Cmd, tail *Tail) (*started, error) {
			outR, outW, _ := os.Pipe()
			errR, errW, _ := os.Pipe()
			cmd.Stdout, cmd.Stderr = outW, errW
			g, err := spawnGroup(cmd)
			_, _ = outW.Close(), errW.Close()
			if err != nil {
				return nil, err
			}
			return (&ioLoop{g: g, out: outR, errp: errR, w: tail}).withGoroutines(), nil
		},
	}
	for name, start := range starters {
		t.Run(name, func(t *testing.T) {
			// The line is the pid of a child left in the plugin's group.
			cmd := exec.Command("/bin/sh", "-c", `sleep 600 & echo $!; echo last words >&2; exit 3`)
			tail := &Tail{}
			st, err := start(cmd, tail)
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			var r lineResult
			select {
			case r = <-st.lines:
			case <-time.After(10 * time.Second):
				t.Fatal("no address line")
			}
			child, err := strconv.Atoi(strings.TrimSpace(r.line))
			if err != nil || r.err != nil || !strings.HasSuffix(r.line, "\n") {
				t.Fatalf("line %q, %v: want the child's pid and a newline", r.line, r.err)
			}
			select {
			case <-st.g.proc.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("exit never reported")
			}
			if e, _ := st.g.proc.Exit(); e.Code != 3 {
				t.Errorf("exit %v, want code 3", e)
			}
			if got := tail.String(); got != "last words" {
				t.Errorf("stderr at the exit: %q, want \"last words\"", got)
			}
			waitGone(t, child)
		})
	}
}

// waitGone waits, boundedly, until pid is no more or a zombie: killed.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		// The state follows the parenthesised command name.
		if err != nil || bytes.Contains(stat, []byte(") Z")) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the plugin's child %d outlived it", pid)
		}
		time.Sleep(10 * time.Millisecond) // polling /proc: no event tells of another's death
	}
}
