package ledger

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	"golang.org/x/sys/unix"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
)

// mapping is the ledger file mapped shared into the plugin's memory: a
// record is stored into the mapping, with no system call, and the store
// lands in the kernel's page cache at once, where it outlives the
// plugin's death (a SIGKILL, an OOM kill) exactly as a write(2) does. The
// file is preallocated (fallocate(2), never a sparse ftruncate(2): a store
// into a hole on a full disk would raise SIGBUS) ledgerwire.Chunk at a
// time, past its records; its zero-filled rest reads as their end (a zero
// frame header is no frame). Only the ledger's writer touches it, under
// its lock.
type mapping struct {
	data []byte // the mapping of the whole file, as long as it is
	size int    // of the records stored in it; zeros follow
}

// preallocate is fallocate(2), and mapShared mmap(2); tests replace them
// to fail as a file system would.
var (
	preallocate = unix.Fallocate
	mapShared   = unix.Mmap
)

// mapFile maps and preallocates the first chunk of f, the ledger at path,
// empty. It returns nil, and no error, where the file cannot be mapped
// (whatever mmap(2) says: a file system that maps no file, or maps files
// read-only) or cannot be preallocated (a file system without
// fallocate(2), a seccomp filter that refuses it): the records are then
// written with write(2), into the file left empty. An error that a
// write(2) could meet too (a full disk, a quota, a file size limit) is
// the ledger's error.
func mapFile(f *os.File, path string) (*mapping, error) {
	m := &mapping{}
	err := m.grow(f, path, ledgerwire.Chunk)
	switch {
	case err == nil:
		return m, nil
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT), errors.Is(err, unix.EFBIG):
		return nil, err
	}
	return nil, nil
}

// grow makes the file, and its mapping, hold at least need bytes, whole
// chunks (ledgerwire.Chunk) of them: its size runs at most a chunk ahead
// of its records (and of a record longer than that, the rest of its last
// chunk). The new mapping is made first, and the file grown into
// it, before the old one goes: a mapping that cannot be made leaves the
// file as it was (one that cannot be mapped at all empty, for write(2)),
// and a file that cannot grow leaves the mapping as it was. The file is
// mapped anew, whole, and its pages are mapped in as they are stored
// into: the plugin's resident memory (VmRSS, which counts a mapped file's
// pages) holds the pages stored into since the file last grew, not the
// whole ledger.
func (m *mapping) grow(f *os.File, path string, need int) error {
	n := (need + ledgerwire.Chunk - 1) / ledgerwire.Chunk * ledgerwire.Chunk
	data, err := mapShared(int(f.Fd()), 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return &os.PathError{Op: "mmap", Path: path, Err: err}
	}
	if err := preallocate(int(f.Fd()), 0, int64(len(m.data)), int64(n-len(m.data))); err != nil {
		_ = unix.Munmap(data)
		return &os.PathError{Op: "fallocate", Path: path, Err: err}
	}
	if m.data != nil {
		_ = unix.Munmap(m.data)
	}
	m.data = data
	return nil
}

// store stores the frame b after the records, growing the file if it
// must. Its length is stored last: a reader (a lookup of a concurrent
// retry, through its own descriptor) sees a zero length, the end of the
// records, until the rest is stored, and a plugin killed at any point of
// the store leaves either no frame or a whole one. A reader on a CPU that
// sees the stores out of order sees a frame whose checksum fails: a torn
// frame, which it reads as the end, as it reads one being written by
// write(2). A failed growth stores nothing and is the error of a failed
// write; a fault (SIGBUS: another process cut the file short under the
// mapping) is broken.
func (m *mapping) store(f *os.File, path string, b []byte) (err, broken error) {
	end := m.size + len(b)
	if end > len(m.data) {
		if err := m.grow(f, path, end); err != nil {
			return err, nil
		}
	}
	if err := storeFrame(m.data[m.size:end], b); err != nil {
		err = fmt.Errorf("%s: %w", path, err)
		return err, err
	}
	m.size = end
	return nil, nil
}

// errFault: a store into the mapping faulted.
var errFault = errors.New("the file was cut short under the plugin's mapping of it: nothing more is recorded")

// storeFrame copies the frame b into dst, its payload and checksum first
// and its length last, and turns a fault into errFault.
func storeFrame(dst, b []byte) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, fault := r.(interface{ Addr() uintptr }); !fault {
				panic(r)
			}
			err = errFault
		}
	}()
	copy(dst[4:], b[4:])
	copy(dst[:4], b[:4])
	return nil
}

// sync flushes the records stored from off on to the disk (msync(2)).
func (m *mapping) sync(path string, off int) error {
	start := off &^ (os.Getpagesize() - 1)
	if err := unix.Msync(m.data[start:m.size], unix.MS_SYNC); err != nil {
		return &os.PathError{Op: "msync", Path: path, Err: err}
	}
	return nil
}

func (m *mapping) close() {
	if m != nil && m.data != nil {
		_ = unix.Munmap(m.data)
		m.data = nil
	}
}
