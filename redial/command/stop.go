package command

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

// plugin is what a Hook launched and must clean up after.
type plugin struct {
	proc   *proc.Process
	stdout *os.File
	lines  <-chan proc.Line // the first line of its stdout
	host   *hostStderr      // to Hook.Stderr, nil if none
	dir    string           // the private dir the Hook created for it
	dirID  os.FileInfo      // dir as it was made: only that dir is removed
	grace  time.Duration    // how long stop waits after asking; < 0: not at all

	sock string // the socket's absolute path; "" if none

	once sync.Once
	err  error // stop's result
}

// checkSocket resolves the printed socket path, which must name a unix
// socket (not a symlink to one).
func (p *plugin) checkSocket(printed, dir string) error {
	sock, err := absSocket(printed, dir)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(sock)
	if err == nil && fi.Mode()&os.ModeSocket == 0 {
		err = fmt.Errorf("not a unix socket but a %v", fi.Mode().Type())
	}
	if err != nil {
		return fmt.Errorf("printed %s, which is not a unix socket: %w", quote(printed), err)
	}
	p.sock = sock
	return nil
}

// stop asks the plugin to exit, kills its group after the grace period (at
// once if it already exited or grace < 0), waits until it is reaped, and
// removes its private dir, with what the plugin left in it (its socket).
// It is a Backend's Stop; it runs once, later calls return its first
// result.
func (p *plugin) stop() error {
	p.once.Do(func() { p.err = p.halt() })
	return p.err
}

func (p *plugin) halt() error {
	var err error
	if _, exited := p.proc.Exit(); !exited && p.grace > 0 {
		if asked, terr := p.proc.Terminate(); asked {
			err = terr
			p.proc.Await(context.Background(), p.grace)
		}
	}
	if kerr := p.proc.Stop(); err == nil {
		err = kerr
	}
	<-p.proc.Done()
	p.host.close(time.Second) // what it wrote reaches the host's Stderr first, and nothing after
	_ = p.stdout.Close()
	if rerr := p.removeDir(); err == nil && rerr != nil {
		err = fmt.Errorf("command: remove socket dir: %w", rerr)
	}
	return err
}

// removeDir removes the private dir and everything in it, if it is still
// the dir the Hook made. os.RemoveAll follows no symlink in it: what a
// link in the dir points to stays. Anything else the plugin put at the
// dir's name (a symlink, a file) is unlinked itself, never followed; a
// directory that is not the one made is left as it is.
func (p *plugin) removeDir() error {
	fi, err := os.Lstat(p.dir)
	switch {
	case err != nil:
		return nil
	case os.SameFile(fi, p.dirID):
		return os.RemoveAll(p.dir)
	case fi.IsDir():
		return nil
	}
	return unlink(p.dir)
}
