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

// TestComposeLog runs the example with real plugin processes, two of them
// SIGKILLed in the middle of a call, and reads its log: mw logging wrote one
// line per call with what the caller got; mw retry, not respawn, retried the
// live plugin's Unavailable; respawn retried the read the death cut short,
// and neither retried the write.
func TestComposeLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, &out); err != nil { // run fails unless the write got ErrOutcomeUnknown
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	log := out.String()
	var codes []string
	for _, m := range regexp.MustCompile(`msg="finished call" .*grpc\.method=(\w+) .*grpc\.code=(\w+)`).FindAllStringSubmatch(log, -1) {
		codes = append(codes, m[1]+":"+m[2])
	}
	if got, want := strings.Join(codes, " "), "Read:OK Read:OK Read:OK Write:Unknown Write:OK"; got != want {
		t.Errorf("mw logging's lines, one per call: %s, want %s", got, want)
	}
	if !strings.Contains(log, `Read("busy"): pid `) || !strings.Contains(log, "request seen 2 time(s)") {
		t.Errorf("the busy read was not sent twice to the live plugin (mw retry)")
	}
	for _, want := range []struct {
		what string
		re   string
		n    int
	}{
		{"two deaths by SIGKILL, named", `level=WARN .*respawn\.event=exit respawn\.plugin=store .*respawn\.signal=9 .*respawn\.reason=crashed`, 2},
		{"one retry by respawn, of the read", `respawn\.event=retry .*grpc\.method=Read `, 1},
		{"no other retry by respawn", `respawn\.event=retry`, 1},
		{"the write not retried", `level=WARN .*respawn\.event=outcome-unknown .*grpc\.method=Write `, 1},
	} {
		if got := len(regexp.MustCompile(want.re).FindAllString(log, -1)); got != want.n {
			t.Errorf("%s: %d lines match %s, want %d", want.what, got, want.re, want.n)
		}
	}
	if t.Failed() {
		t.Logf("the example's output:\n%s", log)
	}
}
