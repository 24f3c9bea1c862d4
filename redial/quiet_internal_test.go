package redial

import (
	"context"
	"testing"
	"time"
)

// TestQuietAfterRecoveries: a spare launch waits while any respawn in the
// process runs, and until quietPeriod has passed since the last one
// ended; in a process where none ran, it does not wait.
func TestQuietAfterRecoveries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var r recoveries
	if !isClosed(r.quiet()) {
		t.Fatal("no respawn ever ran, and the process is not calm")
	}
	r.wait(ctx) // returns at once
	if ctx.Err() != nil {
		t.Fatal("wait waited out its ctx with no respawn")
	}

	r.begin()
	calm := r.quiet()
	if isClosed(calm) {
		t.Fatal("calm while a respawn runs")
	}
	waited := make(chan struct{})
	go func() { r.wait(ctx); close(waited) }()
	r.begin() // a second one, ended first: still not calm
	r.end()
	if isClosed(r.quiet()) {
		t.Fatal("calm while a respawn runs")
	}
	r.end()
	select {
	case <-waited:
	case <-ctx.Done():
		t.Fatal("wait did not return after the quiet period")
	}
	if !isClosed(calm) {
		t.Fatal("wait returned before the process was calm")
	}

	// The next respawn makes the process busy again, with a new signal.
	r.begin()
	defer r.end()
	if again := r.quiet(); isClosed(again) {
		t.Fatal("calm while a respawn runs, after a calm")
	}
}

// TestQuietOneSignal: the end of a respawn closes no signal while another
// begins within quietPeriod: the spare launches and retirements waiting
// behind the recoveries (one each per Conn in a mass kill) keep waiting on
// the one signal, and wake once, when it closes.
func TestQuietOneSignal(t *testing.T) {
	// Longer than any pause of a loaded machine between an end and the
	// next begin: only a respawn's end can close the signal in the loop.
	r := recoveries{period: time.Hour}
	r.begin()
	calm := r.quiet()
	for range 100 {
		r.end()
		r.begin()
		if isClosed(calm) || r.quiet() != calm {
			t.Fatal("a respawn's end closed or replaced the signal the waiters wait on")
		}
	}
	r.period = 0
	r.end()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	select {
	case <-calm:
	case <-ctx.Done():
		t.Fatal("the signal never closed")
	}
}
