package redial

import (
	"fmt"
	"time"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/internal/procfs"
)

// recyclePolicy says when a plugin is replaced by a planned replacement;
// zero fields disable their rule.
type recyclePolicy struct {
	calls uint64        // after this many calls served
	age   time.Duration // once older than this
	rss   uint64        // once its resident memory exceeds this many bytes
	// ledger: once its ledger file exceeds this many bytes, with ledgers;
	// 0: defaultLedgerLimit; <0: never.
	ledger int64
	every  time.Duration // how often the rules are checked; 0: 1s
}

// defaultLedgerLimit is Recycle.Ledger's default.
const defaultLedgerLimit = 16 << 20

// recycling reports whether any rule of Pacing.Recycle applies.
func (c *Conn) recycling() bool {
	r := c.opts.recycle
	return r.calls > 0 || r.age > 0 || r.rss > 0 || c.ledgerLimit() > 0
}

// ledgerLimit is Recycle.Ledger's limit, 0 if none applies. A limit
// below ledgerwire.Chunk is Chunk: a plugin's file is that large from its
// first record on.
func (c *Conn) ledgerLimit() int64 {
	switch l := c.opts.recycle.ledger; {
	case !c.ledgers.on.Load() || l < 0:
		return 0
	case l == 0:
		return defaultLedgerLimit
	default:
		return max(l, ledgerwire.Chunk)
	}
}

// RecycleError says why a plugin was recycled (Pacing.Recycle); it is the
// Err of the [EventRespawnStart] of its replacement, which a host reaches
// with errors.As to tell the rules apart.
type RecycleError struct {
	Plugin     string        // the Conn's name, "" if none
	Generation uint64        // the plugin recycled
	Rule       string        // "calls", "age", "rss" or "ledger"
	Calls      uint64        // calls it had been sent (rule "calls")
	Age        time.Duration // its age (rule "age")
	RSS        uint64        // its resident memory in bytes (rule "rss")
	Ledger     int64         // its ledger file's size in bytes (rule "ledger")
	Limit      string        // the rule's limit, as configured
}

func (e *RecycleError) Error() string {
	var what string
	switch e.Rule {
	case "calls":
		what = fmt.Sprintf("%d calls sent", e.Calls)
	case "age":
		what = fmt.Sprintf("age %v", e.Age.Round(time.Millisecond))
	case "ledger":
		what = fmt.Sprintf("ledger %d KiB", e.Ledger/1024)
	default:
		what = fmt.Sprintf("resident memory %d KiB", e.RSS/1024)
	}
	return fmt.Sprintf("redial: recycling %s generation %d: %s, limit %s", pluginName(e.Plugin), e.Generation, what, e.Limit)
}

// countCall counts a call sent to g, and starts its recycling when it
// reaches the limit. Only with Recycle.Calls.
func (c *Conn) countCall(g *Generation) {
	if n := g.calls.Add(1); n == c.opts.recycle.calls {
		c.recycle(g, &RecycleError{Rule: "calls", Calls: n, Limit: fmt.Sprint(n)})
	}
}

// recycle starts the planned replacement of g, if it is still current and
// nothing else is replacing it. It never waits.
func (c *Conn) recycle(g *Generation, why *RecycleError) {
	why.Plugin, why.Generation = c.opts.name, g.n
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() || c.cur.Load() != g || c.flight != nil {
		return
	}
	_, _ = c.rotateLocked(g, why) // refused while the breaker is open: the next check retries
}

// watchRecycleLocked checks the current plugin every check interval against
// the rules of Pacing.Recycle, until the Conn closes. It is called once, when
// the first plugin becomes current. c.mu is held.
func (c *Conn) watchRecycleLocked() {
	if !c.recycling() {
		return
	}
	every := c.opts.recycle.every
	if every <= 0 {
		every = time.Second
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-c.ctx.Done():
				return
			}
			if g := c.cur.Load(); g != nil {
				if why := c.recycleDue(g); why != nil {
					c.recycle(g, why)
				}
			}
		}
	}()
}

// recycleDue returns why g must be recycled now, nil if it need not be.
func (c *Conn) recycleDue(g *Generation) *RecycleError {
	r := c.opts.recycle
	if r.calls > 0 && g.calls.Load() >= r.calls {
		return &RecycleError{Rule: "calls", Calls: g.calls.Load(), Limit: fmt.Sprint(r.calls)}
	}
	if age := c.opts.now().Sub(g.born); r.age > 0 && age > r.age {
		return &RecycleError{Rule: "age", Age: age, Limit: r.age.String()}
	}
	if p := g.backend.Process; r.rss > 0 && p != nil && !p.ended() {
		rss, err := procfs.ResidentBytes(p.PID)
		// Read only while the process is ours: a pid read after its exit
		// may name another process already.
		if err == nil && !p.ended() && rss > r.rss {
			return &RecycleError{Rule: "rss", RSS: rss, Limit: fmt.Sprintf("%d KiB", r.rss/1024)}
		}
	}
	if lim := c.ledgerLimit(); lim > 0 {
		if n := g.backend.ledger.size(); n > lim {
			return &RecycleError{Rule: "ledger", Ledger: n, Limit: fmt.Sprintf("%d KiB", lim/1024)}
		}
	}
	return nil
}
