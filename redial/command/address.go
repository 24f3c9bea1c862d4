package command

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxAddressLine is the longest first line a [Hook] reads from a plugin,
// newline included: 64 KiB. A plugin that prints more without a newline
// fails to start; what it printed is not kept.
const maxAddressLine = 64 << 10

// maxQuote bounds what an error quotes of a plugin's output, quotes and
// escapes included.
const maxQuote = 1 << 10

// quote quotes s for an error message, cut to at most maxQuote bytes.
func quote(s string) string {
	q := strconv.Quote(s)
	if len(q) <= maxQuote {
		return q
	}
	const ellipsis = "…"
	n := min(len(s), maxQuote)
	for {
		for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
			n--
		}
		q = strconv.Quote(s[:n] + ellipsis)
		if len(q) <= maxQuote {
			return q
		}
		n -= max(1, (len(q)-maxQuote)/4)
	}
}

// address is where a plugin says it serves.
type address struct {
	target string // the gRPC target to dial
	sock   string // the unix socket's path as printed, "" for TCP
	host   string // the TCP host (a name or an IP), "" for a unix socket
}

// parseAddress reads the plugin's first line: a gRPC target or a go-plugin
// handshake line. It never resolves anything nor touches the file system.
func parseAddress(line string) (address, error) {
	s := strings.TrimSpace(line)
	if parts := strings.Split(s, "|"); len(parts) >= 4 {
		// go-plugin handshake: CORE-VERSION|APP-VERSION|NETWORK|ADDR|PROTOCOL
		if len(parts) < 5 || parts[4] != "grpc" {
			return address{}, fmt.Errorf("printed %s: a go-plugin net/rpc plugin; only gRPC plugins can be respawned", quote(s))
		}
		switch addr := parts[3]; parts[2] {
		case "unix":
			if addr != "" {
				return address{target: "unix://" + addr, sock: addr}, nil
			}
		case "tcp":
			if host, ok := hostPort(addr); ok {
				return address{target: addr, host: host}, nil
			}
		default:
			return address{}, fmt.Errorf("printed %s: unknown network %s", quote(s), quote(parts[2]))
		}
		return address{}, fmt.Errorf("printed %s: no valid %s address", quote(s), parts[2])
	}
	switch {
	case strings.HasPrefix(s, "unix://"):
		u, err := url.Parse(s)
		if err == nil && u.Path != "" && u.Host == "" {
			return address{target: s, sock: u.Path}, nil
		}
	case strings.HasPrefix(s, "unix:"):
		if p := strings.TrimPrefix(s, "unix:"); p != "" {
			return address{target: s, sock: p}, nil
		}
	case strings.HasPrefix(s, "/"):
		return address{target: "unix://" + s, sock: s}, nil
	case strings.HasPrefix(s, "dns:"), strings.HasPrefix(s, "passthrough:"):
		// scheme:///endpoint; dns://server/endpoint asks a DNS server of
		// the plugin's choosing, so its host counts as remote.
		_, rest, _ := strings.Cut(s, ":")
		if ep, ok := strings.CutPrefix(rest, "///"); ok && ep != "" && !strings.ContainsAny(ep, " \t/") {
			host, _, err := net.SplitHostPort(ep)
			if err != nil {
				host = ep // no port: the scheme's default
			}
			return address{target: s, host: host}, nil
		}
		if strings.HasPrefix(rest, "//") && len(rest) > 2 {
			return address{target: s, host: ""}, nil
		}
	default:
		if host, ok := hostPort(s); ok {
			return address{target: s, host: host}, nil
		}
	}
	return address{}, fmt.Errorf("printed %s, want a gRPC target such as unix:///tmp/plugin/plugin.sock", quote(s))
}

// hostPort splits "host:port", with a valid port and a host without
// spaces or slashes.
func hostPort(s string) (string, bool) {
	host, port, err := net.SplitHostPort(s)
	if err != nil || !isPort(port) || strings.ContainsAny(host, " \t/") {
		return "", false
	}
	return host, true
}

func isPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n > 0 && n < 65536
}

// isLoopback says whether host names this machine: "localhost" or a
// loopback IP (127.0.0.0/8, ::1, also IPv4-mapped).
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
