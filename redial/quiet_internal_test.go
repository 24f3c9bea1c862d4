package redial

import (
	"testing"
	"time"
)

// TestUntilQuiet: a spare launch waits while any respawn in the process
// runs (up to its limit), then until quietPeriod has passed since the last
// one began or ended, and never past its limit.
func TestUntilQuiet(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	limit := t0.Add(maxDefer)
	for _, tc := range []struct {
		name     string
		active   int
		last     time.Time
		now      time.Time
		want     time.Duration
		wantBusy bool
	}{
		{"nothing ever ran", 0, time.Time{}, t0, 0, false},
		{"one runs: wait to the limit, or its end", 1, t0, t0, maxDefer, true},
		{"one runs, limit near", 1, t0, limit.Add(-time.Millisecond), time.Millisecond, true},
		{"one runs, past the limit", 1, t0, limit.Add(time.Millisecond), 0, true},
		{"one just ended: the quiet period", 0, t0, t0, quietPeriod, false},
		{"one ended 5ms ago", 0, t0, t0.Add(5 * time.Millisecond), quietPeriod - 5*time.Millisecond, false},
		{"quiet long enough", 0, t0, t0.Add(quietPeriod), 0, false},
		{"quiet period cut by the limit", 0, limit.Add(-time.Millisecond), limit.Add(-time.Millisecond), time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recoveries{active: tc.active, last: tc.last}
			got, busy := r.untilQuiet(tc.now, limit)
			if got != tc.want || busy != tc.wantBusy {
				t.Errorf("untilQuiet = %v, %v; want %v, %v", got, busy, tc.want, tc.wantBusy)
			}
		})
	}
}
