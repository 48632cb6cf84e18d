package main

import (
	"io"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// rawIO moves the out-of-band exchange's bytes with raw syscalls between
// the runtime poller's waits (syscall.RawConn), where net.Conn's Read and
// Write make ordinary ones. Why: the exchange's last message comes just
// before a measured loop (sync), after a wait long enough for the
// runtime's monitor (sysmon) to go into its deep sleep; the ordinary read
// or write that followed woke it into its 20 µs naps, and for the next
// ~20 ms it took a vCPU from one of the two spinning sides some 60 times,
// at the start of every measurement. A raw syscall leaves it asleep (the
// same rule as uverbs' completion-channel reads). A connection without a
// RawConn (a test's pipe) takes net.Conn's methods.
type rawIO struct {
	conn net.Conn
	rc   syscall.RawConn // nil: use conn
}

func newRawIO(c net.Conn) rawIO {
	r := rawIO{conn: c}
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			r.rc = rc
		}
	}
	return r
}

// readFull reads exactly len(p) bytes; io.ErrUnexpectedEOF if the peer
// closed first.
func (r rawIO) readFull(p []byte) error {
	if r.rc == nil {
		_, err := io.ReadFull(r.conn, p)
		return err
	}
	off := 0
	var ioErr error
	err := r.rc.Read(func(fd uintptr) bool {
		for off < len(p) {
			n, e := rawRead(fd, p[off:])
			switch {
			case e == unix.EINTR:
				continue
			case e == unix.EAGAIN:
				return false // wait on the poller for more
			case e != 0:
				ioErr = e
				return true
			case n == 0:
				ioErr = io.ErrUnexpectedEOF
				return true
			}
			off += n
		}
		return true
	})
	if err != nil {
		return err
	}
	return ioErr
}

// writeAll writes all of p.
func (r rawIO) writeAll(p []byte) error {
	if r.rc == nil {
		_, err := r.conn.Write(p)
		return err
	}
	off := 0
	var ioErr error
	err := r.rc.Write(func(fd uintptr) bool {
		for off < len(p) {
			n, e := rawWrite(fd, p[off:])
			switch {
			case e == unix.EINTR:
				continue
			case e == unix.EAGAIN:
				return false // wait on the poller for room
			case e != 0:
				ioErr = e
				return true
			}
			off += n
		}
		return true
	})
	if err != nil {
		return err
	}
	return ioErr
}
