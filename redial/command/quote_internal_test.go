package command

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuote(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // a prefix of the result; empty: the whole strconv.Quote
	}{
		{name: "short", in: "hello"},
		{name: "exactly fits", in: strings.Repeat("a", maxQuote-2)},
		{name: "one too many", in: strings.Repeat("a", maxQuote-1), want: `"` + strings.Repeat("a", maxQuote-5)},
		{name: "8 MB", in: strings.Repeat("1|1|unix|", 1<<20), want: `"1|1|unix|`},
		{name: "escapes", in: strings.Repeat("\x00", 2000), want: `"\x00`},
		{name: "multibyte", in: strings.Repeat("é", 2000), want: `"éé`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := quote(tt.in)
			if len(got) > maxQuote {
				t.Errorf("len(quote) = %d, want <= %d", len(got), maxQuote)
			}
			if tt.want == "" {
				if want := `"` + tt.in + `"`; got != want {
					t.Errorf("quote = %.40q..., want it whole", got)
				}
				return
			}
			if !strings.HasPrefix(got, tt.want) || !strings.HasSuffix(got, `…"`) {
				t.Errorf("quote = %.60q...%q, want %.60q... ending in …", got, got[max(0, len(got)-8):], tt.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("quote cut a rune: %q", got)
			}
		})
	}
}

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		host string
		want bool
	}{
		{"localhost", true},
		{"LOCALHOST", true},
		{"127.0.0.1", true},
		{"127.1.2.3", true},
		{"::1", true},
		{"::ffff:127.0.0.1", true},
		{"203.0.113.7", false},
		{"0.0.0.0", false},
		{"", false},
		{"plugin.local", false},
		{"localhost.example.com", false},
		{"::", false},
	}
	for _, tt := range tests {
		if got := isLoopback(tt.host); got != tt.want {
			t.Errorf("isLoopback(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
}

// FuzzParseAddress: any first line parses or fails with a bounded error,
// never panics, and what parses names a unix socket or a TCP host.
func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{
		"unix:///tmp/p/plugin.sock", "unix:rel.sock", "/tmp/x.sock", "127.0.0.1:7000",
		"1|1|unix|/tmp/plugin1|grpc", "1|1|tcp|127.0.0.1:1|grpc", "1|1|tcp|x|netrpc",
		"dns:///a:1", "dns://8.8.8.8/a", "passthrough:///[::1]:80", "unix://host/x", "\xff|\x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		a, err := parseAddress(line)
		if err != nil {
			if a != (address{}) {
				t.Fatalf("parseAddress(%q) = %+v with error %v", line, a, err)
			}
			if n := len(err.Error()); n > 3*maxQuote {
				t.Fatalf("error of %d bytes for a %d-byte line", n, len(line))
			}
			return
		}
		switch {
		case a.target == "":
			t.Fatalf("parseAddress(%q) = %+v: no target", line, a)
		case a.sock != "" && a.host != "":
			t.Fatalf("parseAddress(%q) = %+v: both a socket and a host", line, a)
		case a.sock != "" && !strings.HasPrefix(a.target, "unix:"):
			t.Fatalf("parseAddress(%q) = %+v: a socket with a non-unix target", line, a)
		case a.sock == "" && (strings.HasPrefix(a.target, "unix:") || strings.HasPrefix(a.target, "unix-abstract:")):
			t.Fatalf("parseAddress(%q) = %+v: a unix target without a socket", line, a)
		}
	})
}
