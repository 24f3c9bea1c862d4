//go:build unix

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

// TestDemoLog runs the demo with real plugin processes and real SIGKILLs
// and checks that its log alone tells an operator which plugin died, why,
// how long each respawn took, and which calls were retried or not.
func TestDemoLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, &out); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	log := out.String()
	for _, want := range []struct {
		what string
		re   string
		n    int
	}{
		{"three deaths by SIGKILL from outside, named", `level=WARN .* respawn\.event=exit respawn\.plugin=objectstore .* respawn\.signal=9 respawn\.signal_name=killed respawn\.reason=crashed`, 3},
		{"one plugin retired by the rotation", `respawn\.event=exit respawn\.plugin=objectstore .* respawn\.reason=retired`, 1},
		{"the respawns with their durations", `respawn\.event=respawn-done respawn\.plugin=objectstore respawn\.generation=\d+ respawn\.duration_ms=[0-9.]+`, 4},
		{"the read killed at call 4 retried", `respawn\.event=retry .* respawn\.method=/killdemo\.Store/Read .* call=call-4\n`, 1},
		{"the read killed at call 12 retried", `respawn\.event=retry .* respawn\.method=/killdemo\.Store/Read .* call=call-12\n`, 1},
		{"the write killed at call 8 not retried", `level=WARN .* respawn\.event=outcome-unknown .* respawn\.method=/killdemo\.Store/Write .* call=call-8\n`, 1},
		{"no other retry", `respawn\.event=retry`, 2},
	} {
		if got := len(regexp.MustCompile(want.re).FindAllString(log, -1)); got != want.n {
			t.Errorf("%s: %d lines match %s, want %d", want.what, got, want.re, want.n)
		}
	}
	if t.Failed() {
		t.Logf("the demo's output:\n%s", log)
	}
}
