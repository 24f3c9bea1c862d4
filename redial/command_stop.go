package redial

import (
	"fmt"
	"os"
	"time"
)

// plugin is what a Command launched and must clean up after.
type plugin struct {
	g      *group
	stdout *os.File
	dir    string        // the private dir Command created for it
	grace  time.Duration // how long stop waits after asking; < 0: not at all

	sock string      // the socket seen at handshake, absolute; "" if none
	seen os.FileInfo // its Lstat at handshake
}

// checkSocket resolves the printed socket path and records the socket that
// is there now, which must be a socket.
func (p *plugin) checkSocket(printed, dir string) error {
	sock, err := absSocket(printed, dir)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(sock)
	if err != nil {
		return fmt.Errorf("printed %s: %w", quote(printed), err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("printed %s, which is not a unix socket but a %v", quote(printed), fi.Mode().Type())
	}
	p.sock, p.seen = sock, fi
	return nil
}

// kill kills the plugin's group at once and waits until it is reaped.
func (p *plugin) kill() {
	_ = p.g.kill()
	<-p.g.proc.Done()
}

// stop asks the plugin to exit, kills its group after the grace period (at
// once if it already exited or grace < 0), waits until it is reaped, and
// removes its socket and private dir. It is a Backend's Stop.
func (p *plugin) stop() error {
	var err error
	if _, exited := p.g.proc.Exit(); !exited && p.grace > 0 && canTerminate {
		err = p.g.terminate()
		t := time.NewTimer(p.grace)
		select {
		case <-p.g.proc.Done():
		case <-t.C:
		}
		t.Stop()
	}
	if kerr := p.g.kill(); err == nil {
		err = kerr
	}
	<-p.g.proc.Done()
	_ = p.stdout.Close()
	if p.sock != "" {
		removeSocket(p.sock, p.seen)
	}
	if rerr := os.RemoveAll(p.dir); err == nil && rerr != nil {
		err = fmt.Errorf("redial: remove socket dir: %w", rerr)
	}
	return err
}

// removeSocket removes path if it still is the socket seen at handshake.
// Between the check and the removal a successor could in theory replace
// it; Unix has no "unlink if still this inode". A plugin that reuses a
// fixed path unlinks it before binding, and redial stops the predecessor
// only after it has exited, so the successor's socket is there to be seen.
func removeSocket(path string, seen os.FileInfo) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || !os.SameFile(fi, seen) {
		return
	}
	_ = os.Remove(path)
}
