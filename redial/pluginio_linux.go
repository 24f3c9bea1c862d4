package redial

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// startPlugin starts cmd, which must not have been started, in a process
// group of its own, with its stdout read by redial and its stderr going to
// stderr. cmd.Stdout and cmd.Stderr are set here.
//
// On Linux one goroutine does all the waiting an idle plugin needs: an
// epoll instance, itself in the runtime's poller, holds the plugin's pidfd
// and the read ends of its stdout and stderr, so that reading the address
// line, draining stdout, copying stderr and reaping take one parked
// goroutine and no thread, where os/exec and a blocking waitid take three
// goroutines, one of them in a system call. Without pidfds (Linux before
// 5.3, or a seccomp filter) it falls back to a goroutine each.
//
// stderr is written to on that goroutine, so it must not block: Command
// gives it the tail and an asyncWriter.
func startPlugin(cmd *exec.Cmd, stderr io.Writer) (*started, error) {
	if !pidfdsWork() {
		return startWithGoroutines(cmd, stderr)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		_, _ = outR.Close(), outW.Close()
		return nil, err
	}
	// *os.Files: os/exec hands them to the child and starts no goroutine.
	cmd.Stdout, cmd.Stderr = outW, errW
	g, err := spawnGroup(cmd)
	_, _ = outW.Close(), errW.Close()
	if err != nil {
		_, _ = outR.Close(), errR.Close()
		return nil, err
	}
	l := &ioLoop{g: g, out: outR, errp: errR, w: stderr, lines: make(chan lineResult, 1)}
	if err := l.open(); err != nil {
		l.closeEpoll()
		return l.withGoroutines(), nil
	}
	go l.run()
	return &started{g: g, stdout: outR, lines: l.lines}, nil
}

var (
	pidfdOnce sync.Once
	pidfdOK   bool
)

// pidfdsWork reports whether pidfd_open works here.
func pidfdsWork() bool {
	pidfdOnce.Do(func() {
		fd, err := unix.PidfdOpen(os.Getpid(), 0)
		if err == nil {
			_ = unix.Close(fd)
			pidfdOK = true
		}
	})
	return pidfdOK
}

// ioLoop is the goroutine that waits for a plugin Command started: for
// its stdout, its stderr and its exit.
type ioLoop struct {
	g         *group
	out, errp *os.File // the read ends of stdout and stderr
	w         io.Writer

	ep                  *os.File // the epoll instance
	pidfd, outFd, errFd int
	outEOF, errEOF      bool

	line  []byte          // stdout until the address line is complete
	sent  bool            // the address line has been sent
	lines chan lineResult // gets it
}

// ioBuf is the buffer a wakeup reads into; an idle plugin holds none.
var ioBuf = sync.Pool{New: func() any { b := make([]byte, 4096); return &b }}

// perWakeup bounds the reads of one pipe per epoll_wait, so that a chatty
// plugin cannot delay the sight of its exit.
const perWakeup = 16

// open makes the epoll instance and registers the pidfd and the pipes.
func (l *ioLoop) open() error {
	l.pidfd, l.outFd, l.errFd = -1, rawFd(l.out), rawFd(l.errp)
	// The pid is ours and unreaped (only this loop reaps it): it names
	// the plugin.
	fd, err := unix.PidfdOpen(l.g.pid, 0)
	if err != nil {
		return err
	}
	l.pidfd = fd
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	if err := unix.SetNonblock(ep, true); err != nil {
		_ = unix.Close(ep)
		return err
	}
	for _, fd := range []int{l.pidfd, l.outFd, l.errFd} {
		if fd < 0 {
			_ = unix.Close(ep)
			return errors.New("redial: pipe has no descriptor")
		}
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			_ = unix.Close(ep)
			return err
		}
	}
	l.ep = os.NewFile(uintptr(ep), "epoll") // non-blocking: in the poller
	return nil
}

// closeEpoll lets go of the epoll instance and the pidfd.
func (l *ioLoop) closeEpoll() {
	if l.ep != nil {
		_ = l.ep.Close()
	}
	if l.pidfd >= 0 {
		_ = unix.Close(l.pidfd)
	}
}

// run waits until the plugin has exited, handling its output meanwhile,
// then reaps it.
func (l *ioLoop) run() {
	exited := false
	if rc, err := l.ep.SyscallConn(); err == nil {
		var evs [3]unix.EpollEvent
		_ = rc.Read(func(fd uintptr) bool { // an error: below, the plain wait
			for {
				n, err := unix.EpollWait(int(fd), evs[:], 0)
				switch {
				case errors.Is(err, unix.EINTR):
					continue
				case err != nil:
					return true // below, the plain wait
				case n == 0:
					return false // the poller wakes us
				}
				for _, ev := range evs[:n] {
					switch int(ev.Fd) {
					case l.pidfd:
						exited = true
					case l.outFd:
						l.read(l.out, &l.outEOF, perWakeup, l.stdout)
					case l.errFd:
						l.read(l.errp, &l.errEOF, perWakeup, l.stderr)
					}
				}
				if exited {
					return true
				}
			}
		})
	}
	if !exited {
		_ = waitExited(l.g.pid) // the poller failed us: wait in a system call
	}
	l.g.reapExited(l.flush)
	l.closeEpoll()
}

// flush reads what the plugin left in its pipes, whose writers are gone
// with its group, and closes them. Bounded: a grandchild that left the
// group may still write.
func (l *ioLoop) flush() {
	l.read(l.out, &l.outEOF, 64, l.stdout)
	l.read(l.errp, &l.errEOF, 64, l.stderr)
	l.sendLine() // the plugin exited before a newline: what it printed
	_, _ = l.out.Close(), l.errp.Close()
}

// read reads f, non-blocking, until it is empty, at EOF, or max reads
// have been made, handing the bytes to handle. At EOF (or on an error) it
// takes f out of the epoll set and sets *eof.
func (l *ioLoop) read(f *os.File, eof *bool, max int, handle func([]byte)) {
	if *eof {
		return
	}
	bp := ioBuf.Get().(*[]byte)
	defer ioBuf.Put(bp)
	rc, err := f.SyscallConn()
	if err != nil {
		*eof = true
		return
	}
	cerr := rc.Control(func(fd uintptr) {
		for range max {
			n, err := unix.Read(int(fd), *bp)
			if n > 0 {
				handle((*bp)[:n])
			}
			switch {
			case errors.Is(err, unix.EINTR):
				continue
			case errors.Is(err, unix.EAGAIN):
				return
			case n <= 0 || err != nil:
				*eof = true
				if l.ep != nil {
					_ = unix.EpollCtl(rawFd(l.ep), unix.EPOLL_CTL_DEL, int(fd), nil)
				}
				return
			}
		}
	})
	if cerr != nil {
		*eof = true
	}
	if *eof && f == l.out {
		l.sendLine()
	}
}

// stdout takes bytes of stdout: the address line, as readLine reads it,
// then nothing.
func (l *ioLoop) stdout(b []byte) {
	if l.sent {
		return
	}
	start := len(l.line)
	var done bool
	l.line, done = endLine(append(l.line, b[:min(len(b), MaxAddressLine+1-start)]...), start, MaxAddressLine)
	if done {
		l.sendLine()
	}
}

// sendLine sends the line read so far, once.
func (l *ioLoop) sendLine() {
	if l.sent {
		return
	}
	l.sent = true
	l.lines <- lineOf(l.line, MaxAddressLine)
	l.line = nil
}

// stderr takes bytes of stderr.
func (l *ioLoop) stderr(b []byte) { _, _ = l.w.Write(b) }

// withGoroutines is the fallback when the epoll instance could not be
// made after the plugin started: a goroutine each for stdout, stderr and
// the reaping, which lets the stderr copy finish (up to a second) before
// it reports the exit, as os/exec's WaitDelay does.
func (l *ioLoop) withGoroutines() *started {
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(l.w, l.errp)
	}()
	go l.g.reap(func() {
		t := time.NewTimer(time.Second)
		defer t.Stop()
		select {
		case <-copied:
		case <-t.C:
		}
		_ = l.errp.Close()
	})
	return &started{g: l.g, stdout: l.out, lines: readStdout(l.g, l.out)}
}

// rawFd returns f's descriptor without putting it in blocking mode, as
// f.Fd would; -1 if it has none.
func rawFd(f *os.File) int {
	fd := -1
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(u uintptr) { fd = int(u) })
	}
	return fd
}
