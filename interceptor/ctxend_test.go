package interceptor_test

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// cutter is a unix-socket proxy in front of a plugin: cut closes every
// connection through it, as a broken link would, while the plugin lives.
type cutter struct {
	lis   net.Listener
	to    string
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newCutter(t *testing.T, to string) *cutter {
	t.Helper()
	lis, err := net.Listen("unix", filepath.Join(t.TempDir(), "proxy.sock"))
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{lis: lis, to: to}
	c.wg.Add(1)
	go c.serve()
	t.Cleanup(func() {
		_ = lis.Close()
		c.cut()
		c.wg.Wait()
	})
	return c
}

func (c *cutter) target() string { return "unix://" + c.lis.Addr().String() }

func (c *cutter) serve() {
	defer c.wg.Done()
	for {
		in, err := c.lis.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("unix", c.to)
		if err != nil {
			_ = in.Close()
			continue
		}
		c.mu.Lock()
		c.conns = append(c.conns, in, out)
		c.mu.Unlock()
		c.wg.Add(2)
		go c.pipe(in, out)
		go c.pipe(out, in)
	}
}

func (c *cutter) pipe(dst, src net.Conn) {
	defer c.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

// TestCallerGivesUpDuringEvidenceWait: a write whose connection is cut under
// it (the plugin lives) waits for evidence of a death; the caller's ctx, a
// per-attempt timeout of go-grpc-middleware's retry outside respawn, ends
// first. The write may have run and is not idempotent: it must come back as
// outcome unknown, which that retry does not send again, and run once.
func TestCallerGivesUpDuringEvidenceWait(t *testing.T) {
	bin := plugintest.BuildOnce(t)
	journal := filepath.Join(t.TempDir(), "journal")
	cmd := &command.Hook{Path: bin, Args: []string{"-journal", journal}}
	var proxy *cutter
	hook := respawntest.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
		b, err := cmd.Respawn(ctx, req)
		if err == nil && proxy == nil {
			proxy = newCutter(t, strings.TrimPrefix(b.Target, "unix://"))
			b.Target = proxy.target()
		}
		return b, err
	})
	rc, err := redial.New(hook,
		redial.WithDialOptions(grpc.WithChainUnaryInterceptor(
			retry.UnaryClientInterceptor(retry.WithMax(3), retry.WithPerRetryTimeout(time.Second), retry.WithRetriable(interceptor.Retriable)),
		)),
		// Longer than the per-attempt timeout: the caller gives up first.
		redial.WithPolicy(interceptor.New(interceptor.WithLimits(interceptor.Limits{EvidenceWait: 10 * time.Second}))),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	client := testpb.NewTestClient(rc)
	errc := make(chan error, 1)
	go func() {
		_, err := client.Append(respawntest.Context(t, 20*time.Second), &testpb.AppendRequest{Id: "w", DelayMs: 300})
		errc <- err
	}()
	if err := plugintest.WaitJournal(respawntest.Context(t, 10*time.Second), journal, func(j map[string]int) bool { return j["w"] >= 1 }); err != nil {
		t.Fatal(err)
	}
	proxy.cut()
	err = <-errc
	t.Logf("the caller got: %v", err)
	if !errors.Is(err, interceptor.ErrOutcomeUnknown) || status.Code(err) != codes.Unknown {
		t.Errorf("got %v, want ErrOutcomeUnknown (codes.Unknown)", err)
	}
	j, err := plugintest.ReadJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	if j["w"] != 1 {
		t.Errorf("the write ran %d times, want 1", j["w"])
	}
}
