package interceptor

import (
	"strings"
	"sync"
	"testing"
)

// TestCallIDsAreUnique: call ids made concurrently are 24 hex digits and
// never repeat.
func TestCallIDsAreUnique(t *testing.T) {
	const goroutines, each = 8, 2000
	ids := make(chan string, goroutines*each)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				ids <- newCallID()
			}
		})
	}
	wg.Wait()
	close(ids)
	seen := make(map[string]bool, goroutines*each)
	for id := range ids {
		if len(id) != 24 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("call id %q is not 24 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("call id %q made twice", id)
		}
		seen[id] = true
	}
}
