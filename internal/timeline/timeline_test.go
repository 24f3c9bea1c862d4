package timeline

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestWriteSVG(t *testing.T) {
	// Every picture has a white background and a swatch per outcome in
	// the legend; each call adds one bar segment and one dot.
	const fixedRects = 1 + 3
	tests := []struct {
		name    string
		fill    func(tl *Timeline)
		rects   int      // exactly this many rect elements
		circles int      // exactly this many circle elements (dots)
		legend  []string // text the picture must contain
	}{
		{
			name:   "empty",
			fill:   func(*Timeline) {},
			rects:  fixedRects, // no bars
			legend: []string{"ok (0)", "retried (0)", "failed (0)"},
		},
		{
			name: "calls kills and respawns",
			fill: func(tl *Timeline) {
				now := time.Now()
				tl.Call(now.Add(-time.Millisecond), OK)
				tl.Mark(now, Kill)
				tl.Call(now.Add(-30*time.Millisecond), Retried)
				tl.Call(now.Add(-time.Second), Failed)
				tl.Mark(now.Add(20*time.Millisecond), Respawn)
				tl.Stop()
			},
			rects:   fixedRects + 3,
			circles: 3,
			legend:  []string{"ok (1)", "retried (1)", "failed (1)"},
		},
		{
			name: "out-of-range outcome counts as failed",
			fill: func(tl *Timeline) {
				tl.Call(time.Now(), Outcome(255))
			},
			rects:   fixedRects + 1,
			circles: 1,
			legend:  []string{"ok (0)", "retried (0)", "failed (1)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := New(`chaos <16> & "quotes"`)
			tt.fill(tl)
			var buf bytes.Buffer
			if err := tl.WriteSVG(&buf); err != nil {
				t.Fatalf("WriteSVG: %v", err)
			}
			svg := buf.String()
			elems, err := elements(strings.NewReader(svg))
			if err != nil {
				t.Fatalf("not well-formed XML: %v\n%s", err, svg)
			}
			if elems["svg"] != 1 {
				t.Errorf("got %d svg elements, want 1", elems["svg"])
			}
			if elems["rect"] != tt.rects {
				t.Errorf("got %d rect elements, want %d", elems["rect"], tt.rects)
			}
			if elems["circle"] != tt.circles {
				t.Errorf("got %d circle elements, want %d", elems["circle"], tt.circles)
			}
			for _, l := range tt.legend {
				if !strings.Contains(svg, ">"+l+"<") {
					t.Errorf("legend %q missing:\n%s", l, svg)
				}
			}
			if strings.Contains(svg, "NaN") || strings.Contains(svg, "Inf") {
				t.Errorf("picture has a NaN or Inf coordinate:\n%s", svg)
			}
			if !strings.Contains(svg, "chaos &lt;16&gt; &amp;") {
				t.Errorf("title not escaped:\n%s", svg)
			}
		})
	}
}

// elements parses r as XML and counts its elements by name.
func elements(r io.Reader) (map[string]int, error) {
	d := xml.NewDecoder(r)
	d.Strict = true
	counts := make(map[string]int)
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return counts, nil
		}
		if err != nil {
			return nil, err
		}
		if se, ok := tok.(xml.StartElement); ok {
			counts[se.Name.Local]++
		}
	}
}

func TestNiceTick(t *testing.T) {
	tests := []struct {
		end, want time.Duration
	}{
		{time.Millisecond, time.Millisecond},
		{15 * time.Millisecond, 2 * time.Millisecond},
		{1200 * time.Millisecond, 200 * time.Millisecond},
		{3 * time.Second, 500 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := niceTick(tt.end); got != tt.want {
			t.Errorf("niceTick(%v) = %v, want %v", tt.end, got, tt.want)
		}
	}
}
