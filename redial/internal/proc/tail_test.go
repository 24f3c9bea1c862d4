package proc

import (
	"strings"
	"testing"
)

func TestTail(t *testing.T) {
	long := strings.Repeat("x", tailSize)
	tests := []struct {
		name   string
		writes []string
		want   string
	}{
		{"nothing", nil, ""},
		{"short, trimmed", []string{"  panic: boom\n", "goroutine 1\n"}, "panic: boom\ngoroutine 1"},
		{"one write too long keeps its end", []string{"head" + long}, "…" + long},
		{"many writes keep the last bytes", []string{long, long, "tail"}, "…" + long[4:] + "tail"},
		{"never starts inside a rune", []string{"é" + long[1:]}, "…" + long[1:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tail Tail
			for _, w := range tt.writes {
				if n, err := tail.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(w))
				}
			}
			if got := tail.String(); got != tt.want {
				t.Errorf("String() = %q (%d bytes), want %q (%d bytes)", trim(got), len(got), trim(tt.want), len(tt.want))
			}
		})
	}
	var nilTail *Tail
	if got := nilTail.String(); got != "" {
		t.Errorf("nil Tail: %q, want empty", got)
	}
}

func trim(s string) string {
	if len(s) > 20 {
		return s[:10] + "..." + s[len(s)-10:]
	}
	return s
}
