//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
)

// arrivals is the plugins' stderr as the host receives it (command.Hook's
// Stderr): it picks out the lines in which a plugin announces a call that
// reached it, and passes every other line on to out. It is safe for
// concurrent use, as the stderr of an old and a new plugin may be copied
// at the same time.
type arrivals struct {
	out io.Writer
	ids chan string // ids of calls that reached a plugin, dropped when full

	mu      sync.Mutex
	partial []byte // the start of a line not yet ended
}

func newArrivals(out io.Writer) *arrivals {
	return &arrivals{out: out, ids: make(chan string, 64)}
}

// Write takes a chunk of a plugin's stderr.
func (a *arrivals) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.partial = append(a.partial, p...)
	for {
		end := bytes.IndexByte(a.partial, '\n')
		if end < 0 {
			return len(p), nil
		}
		line := a.partial[:end+1]
		var id string
		if _, err := fmt.Sscanf(string(line), arrivedFormat, &id); err == nil {
			select {
			case a.ids <- id:
			default: // nobody is waiting for that many
			}
		} else {
			_, _ = a.out.Write(line)
		}
		a.partial = a.partial[end+1:]
	}
}

// wait returns once the call id has reached a plugin.
func (a *arrivals) wait(ctx context.Context, id string) error {
	for {
		select {
		case got := <-a.ids:
			if got == id {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("call %s never reached the plugin: %w", id, ctx.Err())
		}
	}
}
