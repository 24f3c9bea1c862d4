package command

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
		wantHost   string
		wantErr    string // a substring of the error; empty for success
	}{
		{name: "unix URL", line: "unix:///tmp/p-1/plugin.sock\n", wantTarget: "unix:///tmp/p-1/plugin.sock", wantSock: "/tmp/p-1/plugin.sock"},
		{name: "unix URL with CRLF", line: "unix:///tmp/x.sock\r\n", wantTarget: "unix:///tmp/x.sock", wantSock: "/tmp/x.sock"},
		{name: "unix: absolute", line: "unix:/tmp/x.sock", wantTarget: "unix:/tmp/x.sock", wantSock: "/tmp/x.sock"},
		{name: "unix: relative", line: "unix:x.sock", wantTarget: "unix:x.sock", wantSock: "x.sock"},
		{name: "bare path", line: "/tmp/x.sock\n", wantTarget: "unix:///tmp/x.sock", wantSock: "/tmp/x.sock"},
		{name: "host:port", line: "127.0.0.1:7000\n", wantTarget: "127.0.0.1:7000", wantHost: "127.0.0.1"},
		{name: "name:port", line: "localhost:7000", wantTarget: "localhost:7000", wantHost: "localhost"},
		{name: "remote host:port", line: "203.0.113.7:443", wantTarget: "203.0.113.7:443", wantHost: "203.0.113.7"},
		{name: "IPv6 loopback", line: "[::1]:7000", wantTarget: "[::1]:7000", wantHost: "::1"},
		{name: "go-plugin unix", line: "1|1|unix|/tmp/x|grpc\n", wantTarget: "unix:///tmp/x", wantSock: "/tmp/x"},
		{name: "go-plugin tcp", line: "1|1|tcp|127.0.0.1:1234|grpc", wantTarget: "127.0.0.1:1234", wantHost: "127.0.0.1"},
		{name: "go-plugin remote tcp", line: "1|1|tcp|203.0.113.7:443|grpc", wantTarget: "203.0.113.7:443", wantHost: "203.0.113.7"},
		{name: "go-plugin tcp without port", line: "1|1|tcp|203.0.113.7|grpc", wantErr: "no valid tcp address"},
		{name: "go-plugin unix without path", line: "1|1|unix||grpc", wantErr: "no valid unix address"},
		{name: "go-plugin unknown network", line: "1|1|udp|x|grpc", wantErr: `unknown network "udp"`},
		{name: "go-plugin netrpc", line: "1|1|unix|/tmp/x|netrpc", wantErr: `net/rpc plugin`},
		{name: "go-plugin without protocol", line: "1|1|unix|/tmp/x", wantErr: `net/rpc plugin`},
		{name: "unix URL with authority", line: "unix://host/tmp/x.sock", wantErr: `printed "unix://host/tmp/x.sock"`},
		{name: "dns target", line: "dns:///plugin.local:7000", wantTarget: "dns:///plugin.local:7000", wantHost: "plugin.local"},
		{name: "dns target without port", line: "dns:///plugin.local", wantTarget: "dns:///plugin.local", wantHost: "plugin.local"},
		{name: "dns target with a server", line: "dns://8.8.8.8/localhost:7000", wantTarget: "dns://8.8.8.8/localhost:7000"},
		{name: "passthrough target", line: "passthrough:///127.0.0.1:7000", wantTarget: "passthrough:///127.0.0.1:7000", wantHost: "127.0.0.1"},
		{name: "non-numeric port", line: "foo:bar", wantErr: `printed "foo:bar"`},
		{name: "garbage", line: "this is not an address\n", wantErr: `printed "this is not an address"`},
		{name: "log line with a colon", line: "error: cannot listen", wantErr: `printed "error: cannot listen"`},
		{name: "empty", line: "", wantErr: `printed ""`},
		{name: "unix URL without path", line: "unix://", wantErr: `printed "unix://"`},
		{name: "unix: without path", line: "unix:", wantErr: `printed "unix:"`},
		{name: "port only", line: "localhost:", wantErr: `printed "localhost:"`},
		{name: "long garbage", line: strings.Repeat("x", 2000), wantErr: `printed "` + strings.Repeat("x", maxQuote-len(`"…"`)) + `…"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := parseAddress(tt.line)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseAddress(%q) error = %v, want one containing %q", tt.line, err, tt.wantErr)
				}
				if a != (address{}) {
					t.Errorf("parseAddress(%q) = %+v with an error, want zero", tt.line, a)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseAddress(%q): %v", tt.line, err)
			}
			want := address{target: tt.wantTarget, sock: tt.wantSock, host: tt.wantHost}
			if a != want {
				t.Errorf("parseAddress(%q) = %+v; want %+v", tt.line, a, want)
			}
		})
	}
}
