package goplugin

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn/internal/gopluginnotice"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

// handshakeMax bounds how much of the plugin's first stdout line is kept.
const handshakeMax = 512

// firstLine is an io.Writer that keeps the first line written to it: the
// go-plugin handshake, or whatever a binary that is not a plugin printed.
// It is safe for concurrent use.
type firstLine struct {
	mu   sync.Mutex
	buf  []byte
	done bool
}

func (f *firstLine) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(p)
	if !f.done {
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			p, f.done = p[:i], true
		}
		f.buf = append(f.buf, p[:min(len(p), handshakeMax-len(f.buf))]...)
		f.done = f.done || len(f.buf) >= handshakeMax
	}
	return n, nil
}

func (f *firstLine) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.TrimSpace(string(f.buf))
}

// explain turns go-plugin's failure to start a client into an error that
// carries the evidence — the exit and stderr tail of the process, the line
// it printed — and that is [redial.Permanent] when that evidence says no
// launch can succeed: the binary cannot run, it is not a go-plugin plugin
// (no handshake, or go-plugin's notice that its magic cookie is missing),
// or it speaks another core protocol, API version or protocol than the
// config accepts.
func (l *launch) explain(err error) error {
	err = fmt.Errorf("goplugin: start plugin: %w", err)
	r := l.runner.Load()
	if r == nil || r.proc.Load() == nil {
		if proc.CannotRun(err) { // the binary never ran
			return redial.Permanent(err)
		}
		return err
	}
	if ee := proc.ExitErrorOf(r.proc.Load()); ee != nil {
		err = fmt.Errorf("%w: %w", err, ee)
		if ee.Exit.Signal == 0 && gopluginnotice.In(ee.Stderr) {
			return redial.Permanent(err)
		}
	}
	if line := r.handshake.String(); line != "" {
		if why := l.refuse(line); why != "" {
			return redial.Permanent(fmt.Errorf("%w (it printed %q: %s)", err, line, why))
		}
	}
	return err
}

// refuse says why no launch of a plugin that printed line can succeed, ""
// if line is a handshake this config accepts.
func (l *launch) refuse(line string) string {
	parts := strings.Split(line, "|")
	if len(parts) < 4 {
		return "not a go-plugin handshake: not a plugin"
	}
	if core, err := strconv.Atoi(parts[0]); err != nil || core != plugin.CoreProtocolVersion {
		return fmt.Sprintf("core protocol %s, want %d", parts[0], plugin.CoreProtocolVersion)
	}
	if v, err := strconv.Atoi(parts[1]); err != nil || !l.versions[v] {
		return fmt.Sprintf("API version %s, which the ClientConfig does not accept", parts[1])
	}
	if len(parts) < 5 || plugin.Protocol(parts[4]) != plugin.ProtocolGRPC {
		return "not a gRPC plugin: only gRPC plugins can be respawned"
	}
	return ""
}

// acceptedVersions are the API versions cfg accepts, as go-plugin's Start
// will compute them (it mutates cfg, so they are read before).
func acceptedVersions(cfg *plugin.ClientConfig) map[int]bool {
	v := make(map[int]bool, len(cfg.VersionedPlugins)+1)
	for n := range cfg.VersionedPlugins {
		v[n] = true
	}
	if cfg.Plugins != nil {
		v[int(cfg.ProtocolVersion)] = true
	}
	return v
}
