package procfs

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A process that listens on a unix socket serves; before it listens, and
// once it stops, it does not.
func TestServingSelf(t *testing.T) {
	self := os.Getpid()
	if got := Serving(self); slices.Contains(got, self) {
		t.Fatalf("Serving(self) = %v before listening; want no self", got)
	}
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if got := Serving(self); !slices.Equal(got, []int{self}) {
		t.Errorf("Serving(self) = %v while listening; want [%d]", got, self)
	}
	_ = l.Close()
	if got := Serving(self); slices.Contains(got, self) {
		t.Errorf("Serving(self) = %v after closing; want no self", got)
	}
	if got := Serving(0); got != nil {
		t.Errorf("Serving(0) = %v, want nil", got)
	}
}

func TestListeningLines(t *testing.T) {
	for _, tt := range []struct {
		name  string
		parse func([]string) (uint64, bool)
		line  []string
		want  uint64
		ok    bool
	}{
		{"unix listening", unixListening, []string{"0:", "2", "0", "00010000", "0001", "01", "103186", "/tmp/p.sock"}, 103186, true},
		{"unix connected", unixListening, []string{"0:", "3", "0", "00000000", "0001", "03", "632"}, 0, false},
		{"unix short", unixListening, []string{"0:", "3"}, 0, false},
		{"tcp listening", tcpListening, []string{"0:", "00000000:07E8", "00000000:0000", "0A", "0:0", "00:0", "0", "0", "0", "636"}, 636, true},
		{"tcp established", tcpListening, []string{"0:", "00000000:07E8", "0100007F:1234", "01", "0:0", "00:0", "0", "0", "0", "637"}, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.parse(tt.line)
			if got != tt.want || ok != tt.ok {
				t.Errorf("got %d, %v; want %d, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestParsePgrp(t *testing.T) {
	if g, ok := parsePgrp([]byte("42 (a) b) S 1 40 40 0")); !ok || g != 40 {
		t.Errorf("parsePgrp = %d, %v; want 40, true", g, ok)
	}
	if _, ok := parsePgrp([]byte("42 (a) S 1")); ok {
		t.Error("parsePgrp of a short line: ok")
	}
}
