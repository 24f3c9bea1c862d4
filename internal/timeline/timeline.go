// Package timeline records the calls, kills and respawns of a chaos
// benchmark and draws them as an SVG picture. It is internal: the pictures
// are a benchmark aid, not part of respawn's API.
package timeline

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
	"time"
)

// Outcome is how one call ended, as drawn on a [Timeline]. A value past
// [Failed] is counted and drawn as Failed.
type Outcome uint8

// The outcomes of a call.
const (
	OK      Outcome = iota // answered at the first try
	Retried                // answered, after at least one failed attempt
	Failed                 // the caller got an error
)

// MarkKind is a moment drawn across the whole [Timeline].
type MarkKind uint8

// The kinds of marks.
const (
	Kill    MarkKind = iota // the plugin was sent SIGKILL
	Respawn                 // a new plugin was ready
)

type call struct {
	end     time.Duration // since the timeline's start
	latency time.Duration
	outcome Outcome
}

type mark struct {
	at   time.Duration
	kind MarkKind
}

// Timeline records calls, kills and respawns over time and draws them as an
// SVG picture with [Timeline.WriteSVG]. It is safe for concurrent use. The
// zero value is not usable; create one with [New].
type Timeline struct {
	title string
	start time.Time

	mu    sync.Mutex
	calls []call
	marks []mark
	end   time.Duration
}

// New returns a Timeline titled title whose clock starts now.
func New(title string) *Timeline {
	return &Timeline{title: title, start: time.Now()}
}

// Call records a call that started at start and has just ended.
func (t *Timeline) Call(start time.Time, o Outcome) {
	now := time.Now()
	t.mu.Lock()
	t.calls = append(t.calls, call{end: now.Sub(t.start), latency: now.Sub(start), outcome: o})
	t.mu.Unlock()
}

// Mark records a kill or a respawn at time at.
func (t *Timeline) Mark(at time.Time, k MarkKind) {
	t.mu.Lock()
	t.marks = append(t.marks, mark{at: at.Sub(t.start), kind: k})
	t.mu.Unlock()
}

// Stop fixes the end of the time axis at now.
func (t *Timeline) Stop() {
	t.mu.Lock()
	t.end = time.Since(t.start)
	t.mu.Unlock()
}

// Geometry of the picture, in SVG user units.
const (
	svgWidth   = 960
	svgHeight  = 520
	padLeft    = 70
	padRight   = 20
	padTop     = 50
	barsHeight = 180 // top panel: completed calls per bin
	panelGap   = 50
	latHeight  = 180 // bottom panel: latency of each call
	bins       = 200
	maxDots    = 6000 // ok calls beyond this are thinned out
)

var colors = [...]string{OK: "#2e9e44", Retried: "#f0a020", Failed: "#d62728"}

// WriteSVG draws the timeline: on top, the calls that ended in each time bin,
// stacked by outcome; below, each call's latency (log scale) at the time it
// ended; kills as dashed red lines and respawns as blue lines across both.
// A call recorded with an Outcome past [Failed] is counted and drawn as
// failed: an outcome the picture does not know is not a success.
func (t *Timeline) WriteSVG(w io.Writer) error {
	t.mu.Lock()
	calls := append([]call(nil), t.calls...)
	marks := append([]mark(nil), t.marks...)
	end := t.end
	t.mu.Unlock()
	for i, c := range calls {
		if c.outcome > Failed {
			calls[i].outcome = Failed
		}
		end = max(end, c.end)
	}
	for _, m := range marks {
		end = max(end, m.at)
	}
	if end <= 0 {
		end = time.Millisecond
	}

	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	plotW := float64(svgWidth - padLeft - padRight)
	x := func(d time.Duration) float64 { return padLeft + plotW*float64(d)/float64(end) }
	barsTop, barsBottom := float64(padTop), float64(padTop+barsHeight)
	latTop := barsBottom + panelGap
	latBottom := latTop + latHeight

	p(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		svgWidth, svgHeight, svgWidth, svgHeight)
	p(`<rect x="0" y="0" width="%d" height="%d" fill="white"/>`+"\n", svgWidth, svgHeight)
	p(`<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", padLeft, escape(t.title))
	counts := [3]int{}
	for _, c := range calls {
		counts[c.outcome]++
	}
	legend := []struct {
		color, text string
	}{
		{colors[OK], fmt.Sprintf("ok (%d)", counts[OK])},
		{colors[Retried], fmt.Sprintf("retried (%d)", counts[Retried])},
		{colors[Failed], fmt.Sprintf("failed (%d)", counts[Failed])},
	}
	lx := padLeft
	for _, l := range legend {
		p(`<rect x="%d" y="30" width="10" height="10" fill="%s"/><text x="%d" y="39">%s</text>`+"\n", lx, l.color, lx+14, escape(l.text))
		lx += 130
	}
	p(`<line x1="%d" y1="35" x2="%d" y2="35" stroke="#d62728" stroke-dasharray="4,3" stroke-width="2"/><text x="%d" y="39">kill</text>`+"\n", lx, lx+20, lx+24)
	lx += 70
	p(`<line x1="%d" y1="35" x2="%d" y2="35" stroke="#1f5fbf" stroke-width="2"/><text x="%d" y="39">respawned</text>`+"\n", lx, lx+20, lx+24)

	// Top panel: stacked histogram of completions.
	var hist [bins][3]int
	peak := 1
	for _, c := range calls {
		i := min(int(int64(bins)*int64(c.end)/int64(end)), bins-1)
		hist[i][c.outcome]++
	}
	for i := range hist {
		peak = max(peak, hist[i][0]+hist[i][1]+hist[i][2])
	}
	binW := plotW / bins
	for i := range hist {
		y := barsBottom
		for _, o := range []Outcome{OK, Retried, Failed} {
			n := hist[i][o]
			if n == 0 {
				continue
			}
			h := float64(barsHeight) * float64(n) / float64(peak)
			y -= h
			p(`<rect x="%.1f" y="%.1f" width="%.2f" height="%.1f" fill="%s"/>`+"\n", padLeft+float64(i)*binW, y, binW, h, colors[o])
		}
	}
	p(`<text x="10" y="%.0f">calls/bin</text>`+"\n", barsTop-6)
	p(`<text x="%d" y="%.0f" text-anchor="end">%d</text>`+"\n", padLeft-4, barsTop+4, peak)
	p(`<text x="%d" y="%.0f" text-anchor="end">0</text>`+"\n", padLeft-4, barsBottom)
	p(`<text x="%d" y="%.0f" fill="#555">bin = %v</text>`+"\n", svgWidth-padRight-120, barsTop-4, (end / bins).Round(time.Microsecond))
	axes(p, barsTop, barsBottom)

	// Bottom panel: latency scatter, log scale from 10µs to the slowest call.
	slowest := 10 * time.Millisecond
	for _, c := range calls {
		slowest = max(slowest, c.latency)
	}
	lo, hi := math.Log10(10e-6), math.Log10(slowest.Seconds())
	y := func(d time.Duration) float64 {
		v := math.Log10(max(d.Seconds(), 10e-6))
		return latBottom - float64(latHeight)*(v-lo)/(hi-lo)
	}
	for _, dec := range []time.Duration{10 * time.Microsecond, 100 * time.Microsecond, time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, time.Second, 10 * time.Second} {
		if dec > slowest {
			break
		}
		yy := y(dec)
		p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%v</text>`+"\n",
			padLeft, yy, svgWidth-padRight, yy, padLeft-4, yy+4, dec)
	}
	p(`<text x="10" y="%.0f">latency</text>`+"\n", latTop-6)
	// Failed and retried calls last, so they are drawn on top.
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].outcome < calls[j].outcome })
	step := max(1, counts[OK]/maxDots)
	for i, c := range calls {
		if c.outcome == OK && i%step != 0 {
			continue
		}
		p(`<circle cx="%.1f" cy="%.1f" r="1.6" fill="%s" fill-opacity="0.7"/>`+"\n", x(c.end), y(c.latency), colors[c.outcome])
	}
	axes(p, latTop, latBottom)

	// Time axis under the bottom panel.
	tick := niceTick(end)
	for d := time.Duration(0); d <= end; d += tick {
		xx := x(d)
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/><text x="%.1f" y="%.1f" text-anchor="middle">%v</text>`+"\n",
			xx, latBottom, xx, latBottom+4, xx, latBottom+16, d)
	}
	p(`<text x="%d" y="%.0f" text-anchor="end">time since start</text>`+"\n", svgWidth-padRight, latBottom+32)

	for _, m := range marks {
		xx := x(m.at)
		style := `stroke="#1f5fbf" stroke-width="1.5"`
		if m.kind == Kill {
			style = `stroke="#d62728" stroke-width="1.5" stroke-dasharray="4,3"`
		}
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" %s/>`+"\n", xx, barsTop, xx, latBottom, style)
	}
	p("</svg>\n")
	return bw.Flush()
}

func axes(p func(string, ...any), top, bottom float64) {
	p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black"/>`+"\n", padLeft, top, padLeft, bottom)
	p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black"/>`+"\n", padLeft, bottom, svgWidth-padRight, bottom)
}

// niceTick returns the smallest round tick spacing (1, 2 or 5 times a power
// of ten, from 1ms) that gives at most 10 ticks over end.
func niceTick(end time.Duration) time.Duration {
	for t := time.Millisecond; ; t *= 10 {
		for _, m := range []time.Duration{1, 2, 5} {
			if end/(m*t) <= 10 {
				return m * t
			}
		}
	}
}

func escape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
