//go:build unix

package goplugin_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn"
	"github.com/grpc-respawn/respawn/goplugin"
	"github.com/grpc-respawn/respawn/health"
	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/countertest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial"
)

// TestBrokerPluginSurvivesRespawns: a plugin that calls back into its host
// through the GRPCBroker, like go-plugin's examples/bidirectional, used
// through DispenseEach by 4 callers while it is SIGKILLed every 500ms.
// Nothing panics, no call waits out go-plugin's 5s wait for a broker id,
// and only the writes that may have run fail, with ErrOutcomeUnknown.
func TestBrokerPluginSurvivesRespawns(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos runs for seconds")
	}
	bin := countertest.BuildOnce(t)
	rc, err := goplugin.Connect(respawntest.Context(t, 30*time.Second),
		goplugin.Config{Client: func() *plugin.ClientConfig { return countertest.Config(bin) }},
		respawn.WithCalls(
			interceptor.WithBoundMethods(func(m string) bool { return m == countertest.PutMethod }),
			interceptor.WithIdempotentMethods(countertest.GetMethod),
		), respawn.WithHealth(health.Config{Off: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	each := goplugin.DispenseEach[*countertest.Client](rc, countertest.Name)
	if err := each.Do(respawntest.Context(t, 30*time.Second), func(*countertest.Client) error { return nil }); err != nil {
		t.Fatal(err)
	}

	ctx, stop := context.WithTimeout(context.Background(), 3*time.Second)
	defer stop()
	var puts, gets, unknown atomic.Int64
	var slowest atomic.Int64 // nanoseconds
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			key := fmt.Sprint("k", i)
			for n := 0; ctx.Err() == nil; n++ {
				callCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				began := time.Now()
				var err error
				if n%2 == 0 {
					err = each.Do(callCtx, func(c *countertest.Client) error { return c.Put(callCtx, key, 1) })
				} else {
					err = each.Do(callCtx, func(c *countertest.Client) error { _, err := c.Get(callCtx, key); return err })
				}
				cancel()
				if d := int64(time.Since(began)); d > slowest.Load() {
					slowest.Store(d)
				}
				switch {
				case err == nil && n%2 == 0:
					puts.Add(1)
				case err == nil:
					gets.Add(1)
				case n%2 == 0 && errors.Is(err, interceptor.ErrOutcomeUnknown):
					unknown.Add(1)
				default:
					t.Errorf("call %d of %s: %v", n, key, err)
				}
			}
		})
	}
	kills := 0
	tick := time.NewTicker(500 * time.Millisecond)
	for ctx.Err() == nil {
		select {
		case <-tick.C:
			if g := rc.Current(); !g.Gone() && syscall.Kill(g.Process().PID, syscall.SIGKILL) == nil {
				kills++
			}
		case <-ctx.Done():
		}
	}
	tick.Stop()
	wg.Wait()
	t.Logf("%d kills; %d puts, %d gets, %d puts of unknown outcome; slowest call %v",
		kills, puts.Load(), gets.Load(), unknown.Load(), time.Duration(slowest.Load()))
	if kills < 3 {
		t.Fatalf("only %d kills: the machine is too slow for this test to mean anything", kills)
	}
	// go-plugin waits 5s for a broker id that never comes: a call sent to
	// the wrong instance shows as a stall that long.
	if d := time.Duration(slowest.Load()); d > time.Second {
		t.Errorf("the slowest call took %v: a call waited for a broker id of another plugin", d)
	}
}

// TestBoundMethodOnADeadPlugin: a broker-bound call on a stub of a plugin
// that is gone fails at once with ErrPluginGone: sent to the successor, it
// would wait 5s for a broker id that never comes. Each gives a stub of the
// successor.
func TestBoundMethodOnADeadPlugin(t *testing.T) {
	bin := countertest.BuildOnce(t)
	ctx := respawntest.Context(t, 30*time.Second)
	rc, err := goplugin.Connect(ctx,
		goplugin.Config{Client: func() *plugin.ClientConfig { return countertest.Config(bin) }},
		respawn.WithCalls(interceptor.WithBoundMethods(func(m string) bool { return m == countertest.PutMethod })))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	raw, err := rc.Dispense(ctx, countertest.Name) // dispensed once
	if err != nil {
		t.Fatal(err)
	}
	once := raw.(*countertest.Client)
	if err := once.Put(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	first := rc.Current()
	respawntest.Kill(t, first)
	if err := once.Put(ctx, "k", 1); !errors.Is(err, redial.ErrPluginGone) {
		t.Fatalf("Put on the dead plugin's stub: %v, want ErrPluginGone", err)
	}
	each := goplugin.DispenseEach[*countertest.Client](rc, countertest.Name)
	var c *countertest.Client
	if err := each.Do(ctx, func(cc *countertest.Client) error { c = cc; return cc.Put(ctx, "k", 1) }); err != nil {
		t.Errorf("Put through Do: %v", err)
	}
	if c == once || rc.Current() == first {
		t.Error("Do gave a stub of the dead plugin")
	}
}
