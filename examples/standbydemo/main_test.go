//go:build linux

package main

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain makes the test binary the plugin when command.Hook execs it
// with pluginEnv set, as main does.
func TestMain(m *testing.M) {
	if os.Getenv(pluginEnv) == "1" {
		if err := servePlugin(); err != nil {
			os.Exit(1)
		}
		return
	}
	goleak.VerifyTestMain(m)
}

// TestDemo runs the demo with real plugin processes and real SIGKILLs: with
// a spare, each kill is answered by the spare, promoted; the leaking plugin
// is recycled by its resident memory, by a rotation, and no call fails (run
// fails otherwise). Timings are printed, not checked.
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, &out); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	log := out.String()
	// With a spare: the pid that answers after a kill is the spare's.
	spare := regexp.MustCompile(`spare ready: pid (\d+)\n(?:.*\n)*?  kill \d: pid \d+ SIGKILLed; first call answered by pid (\d+) `)
	matches := spare.FindAllStringSubmatch(log, -1)
	if len(matches) != 3 {
		t.Errorf("%d kills answered after a spare was ready, want 3", len(matches))
	}
	for _, m := range matches {
		if m[1] != m[2] {
			t.Errorf("spare pid %s ready, but pid %s answered after the kill", m[1], m[2])
		}
	}
	if n := strings.Count(log, "spare promoted to generation"); n != 3 {
		t.Errorf("%d spares promoted, want 3", n)
	}
	if !regexp.MustCompile(`~ redial: recycling plugin generation 1: resident memory \d+ KiB, limit 98304 KiB`).MatchString(log) {
		t.Errorf("the leaking plugin was not recycled by its resident memory")
	}
	if !strings.Contains(log, "exited with code 0, retired") {
		t.Errorf("no recycled plugin retired")
	}
	if t.Failed() {
		t.Logf("the demo's output:\n%s", log)
	}
}
