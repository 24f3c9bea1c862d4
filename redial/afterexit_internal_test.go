package redial

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestAfterExit: f runs once at the exit, on a goroutine of its own; not
// after drop, nor after Close; and Close waits for an f that runs.
func TestAfterExit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	newConn := func() *Conn {
		c := &Conn{}
		c.ctx, c.cancel = context.WithCancel(context.Background())
		return c
	}
	waitGroup := func(c *Conn) {
		done := make(chan struct{})
		go func() { c.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatal("afterExit left its count on the Conn")
		}
	}

	t.Run("exit", func(t *testing.T) {
		c := newConn()
		p, exited := NewProcess(1, func() error { return nil })
		var runs atomic.Int32
		ran := make(chan struct{})
		c.afterExit(p, func() { runs.Add(1); close(ran) })
		exited(Exit{PID: 1, Code: 3})
		select {
		case <-ran:
		case <-ctx.Done():
			t.Fatal("f did not run at the exit")
		}
		c.cancel()
		waitGroup(c)
		if n := runs.Load(); n != 1 {
			t.Fatalf("f ran %d times", n)
		}
	})
	t.Run("exited already", func(t *testing.T) {
		c := newConn()
		p, exited := NewProcess(1, func() error { return nil })
		exited(Exit{PID: 1, Code: 3})
		ran := make(chan struct{})
		c.afterExit(p, func() { close(ran) })
		select {
		case <-ran:
		case <-ctx.Done():
			t.Fatal("f did not run for a process that had exited")
		}
		waitGroup(c)
	})
	t.Run("drop", func(t *testing.T) {
		c := newConn()
		p, exited := NewProcess(1, func() error { return nil })
		var runs atomic.Int32
		drop := c.afterExit(p, func() { runs.Add(1) })
		drop()
		waitGroup(c) // dropped: counted no more, before any exit
		exited(Exit{PID: 1, Code: 3})
		c.cancel()
		if n := runs.Load(); n != 0 {
			t.Fatalf("f ran %d times after drop", n)
		}
	})
	t.Run("close", func(t *testing.T) {
		c := newConn()
		p, exited := NewProcess(1, func() error { return nil })
		var runs atomic.Int32
		c.afterExit(p, func() { runs.Add(1) })
		c.cancel()
		waitGroup(c) // closed: counted no more, before any exit
		exited(Exit{PID: 1, Code: 3})
		if n := runs.Load(); n != 0 {
			t.Fatalf("f ran %d times after Close", n)
		}
	})
	t.Run("close waits for f", func(t *testing.T) {
		c := newConn()
		p, exited := NewProcess(1, func() error { return nil })
		inF, release := make(chan struct{}), make(chan struct{})
		var finished atomic.Bool
		c.afterExit(p, func() { close(inF); <-release; finished.Store(true) })
		exited(Exit{PID: 1, Code: 3})
		select {
		case <-inF:
		case <-ctx.Done():
			t.Fatal("f did not run at the exit")
		}
		c.cancel()
		close(release)
		waitGroup(c)
		if !finished.Load() {
			t.Fatal("the Conn's count ended before f returned")
		}
	})
}
