package redial_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial"
)

// sweepPluginEnv gives the host that TestLedgerDirsSwept kills the test
// plugin's path, built once by the test.
const sweepPluginEnv = "RESPAWN_TEST_SWEEP_PLUGIN"

// TestLedgerDirsSwept SIGKILLs a host whose Conn keeps ledgers, which
// leaves its ledger directory behind, and checks that the next Conn that
// makes a ledger directory removes it, and nothing else: not a live Conn's
// directory, nor one without an owner file, of another mode, behind a
// link, or of another name, nor a file in it that is not a ledger's.
func TestLedgerDirsSwept(t *testing.T) {
	if respawntest.IsHost() {
		hook := &pluginHook{bin: os.Getenv(sweepPluginEnv)}
		hook.set()
		var h redial.Handle
		rc := newConn(t, hook.Respawner(), ledgerPolicy(true, &h))
		if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
			t.Fatalf("Connect: %v", err)
		}
		respawntest.ServeAsHost(t, rc.Current().Process().PID)
		return
	}
	bin := plugintest.BuildOnce(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv(sweepPluginEnv, bin)
	respawntest.WaitDead(t, respawntest.KillHost(t, "^TestLedgerDirsSwept$"))
	dirs, err := filepath.Glob(filepath.Join(tmp, "respawn-ledger-*"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("ledger directories left by the killed host: %q, %v; want one", dirs, err)
	}
	dead := dirs[0]
	for _, name := range []string{"owner", "1.ledger"} {
		if _, err := os.Lstat(filepath.Join(dead, name)); err != nil {
			t.Fatalf("the killed host's directory: %v", err)
		}
	}

	mk := func(dir string, perm os.FileMode, files ...string) string {
		t.Helper()
		if err := os.Mkdir(dir, perm); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, perm); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	at := func(name string) string { return filepath.Join(tmp, name) }
	left := []string{
		mk(at("respawn-ledger-100"), 0o700, "1.ledger"),          // no owner file
		mk(at("respawn-ledger-101"), 0o755, "owner", "1.ledger"), // another mode
		mk(at("respawn-ledger-x103"), 0o700, "owner", "1.ledger"),
		mk(at("elsewhere"), 0o700, "owner", "1.ledger"),
		mk(at("respawn-ledger-104"), 0o700, "1.ledger"),
		mk(at("respawn-ledger-105"), 0o700, "owner", "1.ledger", "notes"),
	}
	if err := os.Symlink(at("elsewhere"), at("respawn-ledger-102")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(at("elsewhere/owner"), at("respawn-ledger-104/owner")); err != nil {
		t.Fatal(err)
	}

	connect := func() string {
		t.Helper()
		hook := &envHook{pluginHook: newPluginHook(t)}
		var h redial.Handle
		rc := newConn(t, hook.Respawner(), ledgerPolicy(true, &h))
		if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
			t.Fatalf("Connect: %v", err)
		}
		return filepath.Dir(hook.ledgerEnv(t, 0)[0])
	}
	live := connect()
	if _, err := os.Lstat(dead); !os.IsNotExist(err) {
		t.Errorf("the killed host's ledger directory after a Conn made its own: %v; want it gone", err)
	}
	connect()
	for _, p := range []string{live, filepath.Join(live, "owner"), filepath.Join(live, "1.ledger")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("a live Conn's %s: %v; want it left", p, err)
		}
	}
	for _, dir := range left {
		if dir == at("respawn-ledger-105") {
			continue
		}
		for _, f := range []string{"owner", "1.ledger"} {
			if _, err := os.Lstat(filepath.Join(dir, f)); err != nil && !(f == "owner" && strings.HasSuffix(dir, "-100")) {
				t.Errorf("%s: %v; want it left", filepath.Join(dir, f), err)
			}
		}
	}
	if _, err := os.Lstat(at("respawn-ledger-102")); err != nil {
		t.Errorf("a link named as a ledger directory: %v; want it left", err)
	}
	for f, want := range map[string]bool{"owner": false, "1.ledger": false, "notes": true} {
		if _, err := os.Lstat(filepath.Join(at("respawn-ledger-105"), f)); (err == nil) != want {
			t.Errorf("a dead host's directory with a file of its own: %s there = %v; want %v", f, err == nil, want)
		}
	}
}
