package proc

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStartPathsKeepOneContract: the I/O loop and its fallback (a
// goroutine each, for want of pidfds or of an epoll instance) deliver the
// first line, have the plugin's last stderr words by the time its exit is
// reported, and kill what is left of its group at that exit. Only the I/O
// loop runs in the other tests.
func TestStartPathsKeepOneContract(t *testing.T) {
	starters := map[string]func(*exec.Cmd, *Tail) (*Process, <-chan Line, error){
		"I/O loop": func(cmd *exec.Cmd, tail *Tail) (*Process, <-chan Line, error) {
			r, err := StartReading(cmd, 64<<10, tail)
			if err != nil {
				return nil, nil, err
			}
			return r.Proc, r.Lines, nil
		},
		"goroutines": func(cmd *exec.Cmd, tail *Tail) (*Process, <-chan Line, error) {
			g, out, errp, err := launch(cmd)
			if err != nil {
				return nil, nil, err
			}
			return g.proc, readWithGoroutines(g, out, errp, 64<<10, tail), nil
		},
	}
	for name, start := range starters {
		t.Run(name, func(t *testing.T) {
			// The line is the pid of a child left in the plugin's group.
			cmd := exec.Command("/bin/sh", "-c", `sleep 600 & echo $!; echo last words >&2; exit 3`)
			tail := &Tail{}
			p, lines, err := start(cmd, tail)
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			var r Line
			select {
			case r = <-lines:
			case <-time.After(10 * time.Second):
				t.Fatal("no address line")
			}
			child, err := strconv.Atoi(strings.TrimSpace(r.Text))
			if err != nil || r.Err != nil || !strings.HasSuffix(r.Text, "\n") {
				t.Fatalf("line %q, %v: want the child's pid and a newline", r.Text, r.Err)
			}
			select {
			case <-p.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("exit never reported")
			}
			if e, _ := p.Exit(); e.Code != 3 {
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
