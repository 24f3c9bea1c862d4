package bench

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestTimelineWriteSVG(t *testing.T) {
	tests := []struct {
		name  string
		fill  func(tl *Timeline)
		rects int // at least this many rect elements
	}{
		{name: "empty", fill: func(*Timeline) {}, rects: 1},
		{name: "calls kills and respawns", rects: 4, fill: func(tl *Timeline) {
			now := time.Now()
			tl.Call(now.Add(-time.Millisecond), OK)
			tl.Mark(now, Kill)
			tl.Call(now.Add(-30*time.Millisecond), Retried)
			tl.Call(now.Add(-time.Second), Failed)
			tl.Mark(now.Add(20*time.Millisecond), Respawn)
			tl.Stop()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := NewTimeline(`chaos <16> & "quotes"`)
			tt.fill(tl)
			var buf bytes.Buffer
			if err := tl.WriteSVG(&buf); err != nil {
				t.Fatalf("WriteSVG: %v", err)
			}
			elems, err := elements(bytes.NewReader(buf.Bytes()))
			if err != nil {
				t.Fatalf("not well-formed XML: %v\n%s", err, buf.String())
			}
			if elems["svg"] != 1 {
				t.Errorf("got %d svg elements, want 1", elems["svg"])
			}
			if elems["rect"] < tt.rects {
				t.Errorf("got %d rect elements, want at least %d", elems["rect"], tt.rects)
			}
			if !strings.Contains(buf.String(), "chaos &lt;16&gt; &amp;") {
				t.Errorf("title not escaped:\n%s", buf.String())
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
