//go:build unix

package interceptor_test

import (
	"io"
	"net"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// stage is a moment in the setup of a gRPC connection.
type stage int

const (
	noStage       stage = iota
	atConnect           // the plugin accepted the connection; nothing was sent
	afterPreface        // the client's preface reached the plugin
	afterSettings       // the plugin's SETTINGS frame reached the client
)

func (s stage) String() string {
	return [...]string{"none", "connect", "preface", "settings"}[s]
}

// stageProxy sits between redial and one plugin, on a unix socket of its
// own, and SIGKILLs the plugin when the first connection through it reaches
// the stage: it is how a test kills a plugin exactly during grpc-go's
// connection setup.
type stageProxy struct {
	lis    net.Listener
	target string // the plugin's socket
	pid    int
	at     stage
	once   sync.Once
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

func newStageProxy(t *testing.T, dir, target string, pid int, at stage) *stageProxy {
	lis, err := net.Listen("unix", filepath.Join(dir, "proxy.sock"))
	if err != nil {
		t.Fatal(err)
	}
	p := &stageProxy{lis: lis, target: target, pid: pid, at: at}
	p.wg.Go(p.serve)
	return p
}

func (p *stageProxy) addr() string { return "unix://" + p.lis.Addr().String() }

func (p *stageProxy) serve() {
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("unix", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		first := false
		p.once.Do(func() { first = true })
		at := noStage
		if first {
			at = p.at
		}
		p.wg.Go(func() { p.pipe(c, s, at) })
	}
}

// pipe copies both ways, killing the plugin at stage at. The plugin's
// death closes the connection on both sides, as it would without a proxy.
func (p *stageProxy) pipe(c, s net.Conn, at stage) {
	defer c.Close()
	defer s.Close()
	if at == atConnect {
		p.kill(c, s)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if at == afterPreface {
			// "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24 bytes.
			if _, err := io.CopyN(s, c, 24); err != nil {
				return
			}
			p.kill(c, s)
		}
		_, _ = io.Copy(s, c)
		_ = s.Close()
	})
	if at == afterSettings {
		// A frame header is 9 bytes; its first 3 are the payload length.
		var h [9]byte
		if _, err := io.ReadFull(s, h[:]); err == nil {
			n := int64(h[0])<<16 | int64(h[1])<<8 | int64(h[2])
			if _, err := c.Write(h[:]); err == nil {
				if _, err := io.CopyN(c, s, n); err == nil {
					p.kill(c, s)
				}
			}
		}
	}
	_, _ = io.Copy(c, s)
	_ = c.Close()
	wg.Wait()
}

func (p *stageProxy) kill(c, s net.Conn) {
	_ = syscall.Kill(p.pid, syscall.SIGKILL)
	_ = s.Close()
	_ = c.Close()
}

// close stops the proxy and its connections and waits for its goroutines.
func (p *stageProxy) close() {
	_ = p.lis.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
