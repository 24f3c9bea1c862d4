// Package appendtest drives the Appends of exactly-once tests: writers that
// call Append in a loop, each call with an id of its own, while the test
// kills plugins, and the check of what their callers were told against the
// plugin's journal, the ground truth (the ledger is what is under test).
package appendtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/grpc-respawn/respawn/interceptor"
)

// Interrupted reports whether err says that the dead plugin's ledger shows
// the call in its handler at the death.
func Interrupted(err error) bool {
	return errors.Is(err, interceptor.ErrOutcomeUnknown) && strings.Contains(err.Error(), "(interrupted in its handler)")
}

// Writers runs n goroutines that call append in a loop, with the ids
// "<prefix><writer>-<n>", until stop is called, which waits for them and
// returns each id's error.
func Writers(ctx context.Context, n int, prefix string, append func(ctx context.Context, id string) error) (stop func() map[string]error) {
	var (
		mu      sync.Mutex
		results = make(map[string]error)
		wg      sync.WaitGroup
		done    = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-done:
					return
				default:
				}
				id := fmt.Sprintf("%s%d-%d", prefix, i, k)
				err := append(ctx, id)
				mu.Lock()
				results[id] = err
				mu.Unlock()
			}
		})
	}
	return func() map[string]error {
		close(done)
		wg.Wait()
		return results
	}
}

// CheckExactlyOnce fails t unless every Append in results that was
// answered ran exactly once by journal (executions per id), every one that
// failed was interrupted in its handler and ran at most once, and the
// journal holds no id that was not called. It returns how many were
// answered and how many interrupted.
func CheckExactlyOnce(t testing.TB, journal map[string]int, results map[string]error) (answered, interrupted int) {
	t.Helper()
	for id, err := range results {
		switch n := journal[id]; {
		case err == nil:
			answered++
			if n != 1 {
				t.Errorf("Append %s answered and ran %d times; want 1", id, n)
			}
		case Interrupted(err):
			interrupted++
			if n > 1 {
				t.Errorf("Append %s interrupted and ran %d times; want at most 1", id, n)
			}
		default:
			t.Errorf("Append %s: %v; want it answered, or ErrOutcomeUnknown, interrupted in its handler", id, err)
		}
	}
	for id, n := range journal {
		if _, called := results[id]; !called || n > 1 {
			t.Errorf("journal: %s ran %d times; called: %v", id, n, called)
		}
	}
	return answered, interrupted
}
