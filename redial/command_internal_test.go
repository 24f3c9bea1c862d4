package redial

import (
	"strings"
	"testing"
)

func TestParseAddress(t *testing.T) {
	tests := []struct {
		name       string
		line       string
		wantTarget string
		wantSock   string
		wantErr    string // a substring of the error; empty for success
	}{
		{name: "unix URL", line: "unix:///tmp/p-1/plugin.sock\n", wantTarget: "unix:///tmp/p-1/plugin.sock", wantSock: "/tmp/p-1/plugin.sock"},
		{name: "unix URL with CRLF", line: "unix:///tmp/x.sock\r\n", wantTarget: "unix:///tmp/x.sock", wantSock: "/tmp/x.sock"},
		{name: "unix: absolute", line: "unix:/tmp/x.sock", wantTarget: "unix:/tmp/x.sock", wantSock: "/tmp/x.sock"},
		{name: "unix: relative", line: "unix:x.sock", wantTarget: "unix:x.sock", wantSock: "x.sock"},
		{name: "bare path", line: "/tmp/x.sock\n", wantTarget: "unix:///tmp/x.sock", wantSock: "/tmp/x.sock"},
		{name: "host:port", line: "127.0.0.1:7000\n", wantTarget: "127.0.0.1:7000"},
		{name: "name:port", line: "localhost:7000", wantTarget: "localhost:7000"},
		{name: "go-plugin unix", line: "1|1|unix|/tmp/x|grpc\n", wantTarget: "unix:///tmp/x", wantSock: "/tmp/x"},
		{name: "go-plugin tcp", line: "1|1|tcp|127.0.0.1:1234|grpc", wantTarget: "127.0.0.1:1234"},
		{name: "go-plugin unknown network", line: "1|1|udp|x|grpc", wantErr: `unknown network "udp"`},
		{name: "go-plugin netrpc", line: "1|1|unix|/tmp/x|netrpc", wantErr: `net/rpc plugin`},
		{name: "go-plugin without protocol", line: "1|1|unix|/tmp/x", wantErr: `net/rpc plugin`},
		{name: "unix URL with authority", line: "unix://host/tmp/x.sock", wantErr: `printed "unix://host/tmp/x.sock"`},
		{name: "dns target", line: "dns:///plugin.local:7000", wantTarget: "dns:///plugin.local:7000"},
		{name: "non-numeric port", line: "foo:bar", wantErr: `printed "foo:bar"`},
		{name: "garbage", line: "this is not an address\n", wantErr: `printed "this is not an address"`},
		{name: "log line with a colon", line: "error: cannot listen", wantErr: `printed "error: cannot listen"`},
		{name: "empty", line: "", wantErr: `printed ""`},
		{name: "unix URL without path", line: "unix://", wantErr: `printed "unix://"`},
		{name: "unix: without path", line: "unix:", wantErr: `printed "unix:"`},
		{name: "port only", line: "localhost:", wantErr: `printed "localhost:"`},
		{name: "long garbage", line: strings.Repeat("x", 200), wantErr: `printed "` + strings.Repeat("x", 80) + `…"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target, sock, err := parseAddress(tt.line)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseAddress(%q) error = %v, want one containing %q", tt.line, err, tt.wantErr)
				}
				if target != "" || sock != "" {
					t.Errorf("parseAddress(%q) = %q, %q with an error, want empty", tt.line, target, sock)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseAddress(%q): %v", tt.line, err)
			}
			if target != tt.wantTarget || sock != tt.wantSock {
				t.Errorf("parseAddress(%q) = %q, %q; want %q, %q", tt.line, target, sock, tt.wantTarget, tt.wantSock)
			}
		})
	}
}
