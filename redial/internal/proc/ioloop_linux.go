package proc

import (
	"errors"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// readPipes reads the plugin's pipes and reaps it: with one goroutine, the
// I/O loop, where pidfds work, else with a goroutine each.
func readPipes(g *group, stdout, stderr *os.File, limit int, w io.Writer) <-chan Line {
	if !pidfdsWork() {
		return readWithGoroutines(g, stdout, stderr, limit, w)
	}
	l := &ioLoop{g: g, out: stdout, errp: stderr, w: w, limit: limit, lines: make(chan Line, 1)}
	if err := l.open(); err != nil {
		l.closeEpoll()
		return readWithGoroutines(g, stdout, stderr, limit, w)
	}
	go l.run()
	return l.lines
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

// ioLoop is the goroutine that waits for a plugin StartReading started: for
// its stdout, its stderr and its exit.
type ioLoop struct {
	g         *group
	out, errp *os.File // the read ends of stdout and stderr
	w         io.Writer
	limit     int // of the first line of stdout

	ep                  *os.File // the epoll instance
	pidfd, outFd, errFd int
	outEOF, errEOF      bool

	line  []byte    // stdout until the first line is complete
	sent  bool      // the first line has been sent
	lines chan Line // gets it
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

// stdout takes bytes of stdout: the first line, as readLine reads it,
// then nothing.
func (l *ioLoop) stdout(b []byte) {
	if l.sent {
		return
	}
	start := len(l.line)
	var done bool
	l.line, done = endLine(append(l.line, b[:min(len(b), l.limit+1-start)]...), start, l.limit)
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
	l.lines <- lineOf(l.line, l.limit)
	l.line = nil
}

// stderr takes bytes of stderr.
func (l *ioLoop) stderr(b []byte) { _, _ = l.w.Write(b) }

// rawFd returns f's descriptor without putting it in blocking mode, as
// f.Fd would; -1 if it has none.
func rawFd(f *os.File) int {
	fd := -1
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(u uintptr) { fd = int(u) })
	}
	return fd
}
