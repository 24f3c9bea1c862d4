//go:build unix

package redial_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial"
)

// ledgerPolicy is a call policy that asks for ledgers, or not, and keeps
// the Conn's Handle.
func ledgerPolicy(keep bool, h *redial.Handle) redial.Option {
	return redial.WithPolicy(respawntest.StartFunc(func(hh redial.Handle) redial.Binding {
		*h = hh
		return redial.Binding{Ledgers: keep}
	}))
}

// envHook runs the test plugin through a pluginHook and keeps the
// environment each launch was asked to have.
type envHook struct {
	*pluginHook
	mu   sync.Mutex
	envs [][]string
}

func (e *envHook) Respawner() redial.Respawner {
	inner := e.pluginHook.Respawner()
	return respawntest.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
		e.mu.Lock()
		e.envs = append(e.envs, req.Env)
		e.mu.Unlock()
		return inner.Respawn(ctx, req)
	})
}

// ledgerEnv returns the values of RESPAWN_LEDGER in the n-th launch's
// environment.
func (e *envHook) ledgerEnv(t *testing.T, n int) []string {
	t.Helper()
	return e.envValues(t, n, ledgerwire.Env)
}

// envValues returns the values of the variable name in the n-th launch's
// environment.
func (e *envHook) envValues(t *testing.T, n int, name string) []string {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.envs) <= n {
		t.Fatalf("%d launches; want a launch %d", len(e.envs), n+1)
	}
	var vs []string
	for _, kv := range e.envs[n] {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			vs = append(vs, v)
		}
	}
	return vs
}

// TestLedgerEnv checks that a launch is given a ledger file, in a private
// directory of the Conn's, only when the policy asks for ledgers, and that
// Close removes the directory.
func TestLedgerEnv(t *testing.T) {
	for _, keep := range []bool{false, true} {
		name := "no ledgers"
		if keep {
			name = "Binding.Ledgers"
		}
		t.Run(name, func(t *testing.T) {
			hook := &envHook{pluginHook: newPluginHook(t)}
			var h redial.Handle
			rc := newConn(t, hook.Respawner(), ledgerPolicy(keep, &h))
			if err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second)); err != nil {
				t.Fatalf("Connect: %v", err)
			}
			env := hook.ledgerEnv(t, 0)
			g := rc.Current()
			if !keep {
				if len(env) != 0 || (g.Ledger().Kept() != "") {
					t.Fatalf("%s = %q, Ledger %v; want none, false", ledgerwire.Env, env, (g.Ledger().Kept() != ""))
				}
				return
			}
			if len(env) != 1 || !filepath.IsAbs(env[0]) || !ledgerwire.ValidPath(env[0]) {
				t.Fatalf("%s = %q; want one absolute path of a ledger file", ledgerwire.Env, env)
			}
			dir := filepath.Dir(env[0])
			if st, err := os.Lstat(dir); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
				t.Fatalf("ledger directory %s: %v, %v; want a directory, mode 0700", dir, st.Mode(), err)
			}
			if !(g.Ledger().Kept() != "") {
				t.Errorf("Ledger = false for a plugin that made its ledger file")
			}
			if err := rc.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("ledger directory after Close: %v; want it gone", err)
			}
		})
	}
}

// TestLedgerKept checks that a plugin keeps a ledger only once the file
// the Conn made for its launch, at its name, begins with the opened record
// of its launch's key and its process's pid, and (on Linux) that process
// holds the file open: not while it is empty, not for another process's
// record or another key, not for a record of its pid that it did not
// write, not for a link or another file put at its name.
func TestLedgerKept(t *testing.T) {
	hook := &envHook{pluginHook: newPluginHook(t, "-no-ledger")}
	var h redial.Handle
	rc := newConn(t, hook.Respawner(), ledgerPolicy(true, &h))
	if err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	g := rc.Current()
	path := hook.ledgerEnv(t, 0)[0]
	key := hook.envValues(t, 0, ledgerwire.KeyEnv)[0]
	if g.Ledger().Kept() != "" {
		t.Fatal("Ledger kept before the plugin wrote its ledger file")
	}
	write := func(path string, b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(path, ledgerwire.AppendOpened(nil, key, os.Getpid()))
	if g.Ledger().Kept() != "" {
		t.Error("Ledger kept for a file another process opened with the launch's key")
	}
	write(path, ledgerwire.AppendOpened(nil, "other", g.Process().PID))
	if g.Ledger().Kept() != "" {
		t.Error("Ledger kept for a file opened with another key")
	}
	write(path, ledgerwire.AppendOpened(nil, key, g.Process().PID))
	if runtime.GOOS == "linux" && g.Ledger().Kept() != "" {
		t.Error("Ledger kept for a file the plugin's process does not hold open")
	}

	hook = &envHook{pluginHook: newPluginHook(t)}
	rc = newConn(t, hook.Respawner(), ledgerPolicy(true, &h))
	if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	g = rc.Current()
	path = hook.ledgerEnv(t, 0)[0]
	if g.Ledger().Kept() == "" {
		t.Fatal("Ledger not kept for the file the plugin opened with its key")
	}
	mine, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "elsewhere.ledger")
	write(target, mine)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if g.Ledger().Kept() != "" {
		t.Error("Ledger kept for a link at the ledger's name")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	write(path, mine)
	if g.Ledger().Kept() != "" {
		t.Error("Ledger kept for another file at the ledger's name")
	}
	if err := rc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Lstat(target); err != nil {
		t.Errorf("the link's target after Close: %v; want it left alone", err)
	}
}

// TestLedgerDirUnusable makes the temporary directory a regular file: a
// Conn that keeps ledgers cannot make its directory, and its first launch
// fails saying so, without running the hook.
func TestLedgerDirUnusable(t *testing.T) {
	hook := &envHook{pluginHook: newPluginHook(t)}
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", notDir)
	var h redial.Handle
	rc := newConn(t, hook.Respawner(), ledgerPolicy(true, &h))
	err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second))
	if err == nil || !strings.Contains(err.Error(), "redial: ledger directory") {
		t.Fatalf("Connect: %v; want an error about the ledger directory", err)
	}
	if n := hook.calls.Load(); n != 0 {
		t.Errorf("hook ran %d times; want 0", n)
	}
}

// TestLedgerEnvInherited: a host that is itself a plugin given a ledger
// (RESPAWN_LEDGER in its own environment), whose Conn keeps none, clears
// the variable for its plugins, so that they do not take its file for
// theirs.
func TestLedgerEnvInherited(t *testing.T) {
	t.Setenv(ledgerwire.Env, filepath.Join(t.TempDir(), "1.ledger"))
	hook := &envHook{pluginHook: newPluginHook(t)}
	var h redial.Handle
	rc := newConn(t, hook.Respawner(), ledgerPolicy(false, &h))
	if err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	if env := hook.ledgerEnv(t, 0); len(env) != 1 || env[0] != "" {
		t.Errorf("%s in the launch's Env = %q; want it set empty", ledgerwire.Env, env)
	}
}

// TestLedgerRelativeTempDir: with a relative TMPDIR, the Conn still gives
// its plugins an absolute path to their ledger, which they keep: a
// relative one they refuse, and the ledger would be off.
func TestLedgerRelativeTempDir(t *testing.T) {
	hook := &envHook{pluginHook: newPluginHook(t)}
	base, err := os.MkdirTemp("", "r") // short: the plugin's socket is in it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	t.Chdir(base)
	t.Setenv("TMPDIR", ".")
	var h redial.Handle
	rc := newConn(t, hook.Respawner(), ledgerPolicy(true, &h))
	if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	if env := hook.ledgerEnv(t, 0); len(env) != 1 || !filepath.IsAbs(env[0]) {
		t.Errorf("%s = %q; want an absolute path", ledgerwire.Env, env)
	}
	if rc.Current().Ledger().Kept() == "" {
		t.Error("the plugin keeps no ledger")
	}
}

// TestLedgerCloseLeavesDirs: a directory that a plugin makes in its
// Conn's ledger directory under a ledger file's name is not the Conn's:
// Close leaves it, and so the ledger directory too.
func TestLedgerCloseLeavesDirs(t *testing.T) {
	hook := &envHook{pluginHook: newPluginHook(t)}
	var h redial.Handle
	rc := newConn(t, hook.Respawner(), ledgerPolicy(true, &h))
	if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	made := filepath.Join(filepath.Dir(hook.ledgerEnv(t, 0)[0]), ledgerwire.FileName(99))
	if err := os.Mkdir(made, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Dir(made)) })
	if err := rc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if st, err := os.Lstat(made); err != nil || !st.IsDir() {
		t.Errorf("a plugin's directory %s after Close: %v; want it left", made, err)
	}
}
