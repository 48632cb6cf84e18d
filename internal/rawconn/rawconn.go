// Package rawconn moves a command's out-of-band TCP bytes (perftest's and
// pingpong's address exchange) with raw read(2) and write(2) between the
// runtime poller's waits (syscall.RawConn), where net.Conn's Read and Write
// make ordinary syscalls.
//
// Why: the exchange's last message comes just before a measured loop,
// after a wait long enough for the runtime's monitor (sysmon) to go into
// its deep sleep, and the ordinary read or write that followed woke it into
// its shortest naps (50 of 20 µs, then doubling to 10 ms: some 60 wake-ups
// in the loop's first ~20 ms, each taking a vCPU from one of the two
// spinning sides on the rig; docs/COST.md, session 42). A raw
// syscall leaves it asleep, the rule uverbs' completion-channel reads
// follow. The socket is non-blocking, so neither call waits in the kernel.
package rawconn

import (
	"io"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// Conn reads and writes a connection's bytes. A connection without a
// RawConn (a test's pipe) takes net.Conn's own methods.
type Conn struct {
	conn net.Conn
	rc   syscall.RawConn // nil: use conn
}

// New is c's Conn.
func New(c net.Conn) Conn {
	r := Conn{conn: c}
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			r.rc = rc
		}
	}
	return r
}

// Raw reports whether the bytes move by raw syscalls.
func (r Conn) Raw() bool { return r.rc != nil }

// ReadFull reads exactly len(p) bytes; io.ErrUnexpectedEOF if the peer
// closed first. The connection's read deadline holds.
func (r Conn) ReadFull(p []byte) error {
	_, err := r.ReadAtLeast(p, len(p))
	return err
}

// ReadAtLeast reads into p until it has at least n bytes (io.ReadAtLeast),
// taking what a read brings beyond them; io.ErrUnexpectedEOF if the peer
// closed after some but fewer, io.EOF if before any, io.ErrShortBuffer if
// p is shorter than n.
func (r Conn) ReadAtLeast(p []byte, n int) (int, error) {
	if r.rc == nil {
		return io.ReadAtLeast(r.conn, p, n)
	}
	if len(p) < n {
		return 0, io.ErrShortBuffer
	}
	off := 0
	var ioErr error
	err := r.rc.Read(func(fd uintptr) bool { return pump(fd, rawRead, p, n, &off, &ioErr) })
	if err != nil {
		return off, err
	}
	return off, ioErr
}

// WriteAll writes all of p. The connection's write deadline holds.
func (r Conn) WriteAll(p []byte) error {
	if r.rc == nil {
		_, err := r.conn.Write(p)
		return err
	}
	off := 0
	var ioErr error
	err := r.rc.Write(func(fd uintptr) bool { return pump(fd, rawWrite, p, len(p), &off, &ioErr) })
	if err != nil {
		return err
	}
	return ioErr
}

// pump moves p[*off:] with op (rawRead or rawWrite) until *off reaches n:
// the body of a RawConn callback. It reports false when the socket would
// block (RawConn then waits on the poller and calls again), true once done
// or failed (*ioErr set: the errno, or for 0 bytes moved the peer's
// close, io.EOF before any byte and io.ErrUnexpectedEOF after some).
func pump(fd uintptr, op func(uintptr, []byte) (int, unix.Errno), p []byte, n int, off *int, ioErr *error) bool {
	for *off < n {
		k, e := op(fd, p[*off:])
		switch {
		case e == unix.EINTR:
			continue
		case e == unix.EAGAIN:
			return false
		case e != 0:
			*ioErr = e
			return true
		case k == 0:
			*ioErr = io.ErrUnexpectedEOF
			if *off == 0 {
				*ioErr = io.EOF
			}
			return true
		}
		*off += k
	}
	return true
}

// Resolved reports whether a QP's RTR modify towards gid finds its MAC at
// once: gid is own (this side's own GID: a loopback), or the address of c's
// peer (an IPv4-mapped GID of its IPv4 address, or the same IPv6 address),
// whose neighbour the exchange's own packets have resolved. Then the modify
// can be uverbs' QP.ModifyResolved (ConnectOptions.Resolved): no ordinary
// syscall, which would wake the runtime's monitor just before the measured
// loop. A zero gid is never resolved.
func Resolved(c net.Conn, own, gid [16]byte) bool {
	if gid == ([16]byte{}) {
		return false
	}
	if gid == own {
		return true
	}
	if c == nil {
		return false
	}
	a, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return false
	}
	peer, ok := netip.AddrFromSlice(a.IP)
	return ok && peer.Unmap() == netip.AddrFrom16(gid).Unmap()
}
