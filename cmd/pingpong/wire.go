package main

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/goverbs/goverbs/internal/hexaddr"
	"github.com/goverbs/goverbs/internal/rawconn"
)

// dest is one QP's address as the pingpong examples exchange it.
type dest struct {
	lid uint16
	qpn uint32
	psn uint32
	gid [16]byte
}

// msgSize is sizeof "0000:000000:000000:00000000000000000000000000000000"
// in C: the message text and its NUL. Every message is exactly this long.
const msgSize = 4 + 1 + 6 + 1 + 6 + 1 + 32 + 1

// done is the client's last message, sizeof "done" bytes (with the NUL).
var done = []byte("done\x00")

// maxQP is srq_pingpong's MAX_QP: its exchange always carries this many
// messages each way, whatever -q says (the unused ones are zeros).
const maxQP = 256

// encode formats d as "%04x:%06x:%06x:%s" with the GID as 32 hex digits
// (gid_to_wire_gid: the GID's bytes in order), NUL-padded to msgSize; never
// longer: lid is 16 bits, qpn and psn 24.
func (d dest) encode() []byte {
	return hexaddr.Encode(msgSize, fmt.Sprintf("%04x:%06x:%06x", d.lid, d.qpn, d.psn), d.gid)
}

// decodeDest parses a message as sscanf("%x:%x:%x:%s") and
// wire_gid_to_gid do.
func decodeDest(b []byte) (dest, error) {
	var v [3]uint64
	gid, err := hexaddr.Decode(b, v[:])
	if err != nil {
		return dest{}, err
	}
	return dest{lid: uint16(v[0]), qpn: uint32(v[1]), psn: uint32(v[2]), gid: gid}, nil
}

// hasInterfaceID is rdma-core's test for addressing with a GRH: the GID's
// low 64 bits (gid.global.interface_id) are not zero.
func (d dest) hasInterfaceID() bool {
	for _, b := range d.gid[8:] {
		if b != 0 {
			return true
		}
	}
	return false
}

// exchangeClient connects to the server, sends mine (one message per QP),
// reads as many back, then sends "done": the client side of
// pp_client_exch_dest. It returns the connection, for the caller to close
// after the loop (see session.xconn).
func exchangeClient(host string, port int, mine []dest) (theirs []dest, conn net.Conn, err error) {
	c, err := net.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, nil, failf("Couldn't connect to %s:%d", host, port)
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	rc := rawconn.New(c) // raw syscalls: the last message comes just before the loop
	for _, d := range mine {
		if err := rc.WriteAll(d.encode()); err != nil {
			return nil, nil, failure("Couldn't send local address")
		}
	}
	theirs, err = readDests(rc, len(mine))
	if err != nil {
		return nil, nil, failf("Couldn't read/write remote address: %v", err)
	}
	if err := rc.WriteAll(done); err != nil {
		return nil, nil, failf("Couldn't read/write remote address: %v", err)
	}
	return theirs, c, nil
}

// exchangeServer listens on port, accepts one client, reads its addresses,
// calls connect with the connection and them (the server's QPs must be
// ready before the client learns their numbers), sends mine and waits for
// "done": the server side of pp_server_exch_dest. It returns the
// connection, for the caller to close after the loop (see session.xconn).
func exchangeServer(port int, mine []dest, connect func(net.Conn, []dest) error) (theirs []dest, conn net.Conn, err error) {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return nil, nil, failf("Couldn't listen to port %d", port)
	}
	c, err := l.Accept()
	l.Close()
	if err != nil {
		return nil, nil, failure("accept() failed")
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	rc := rawconn.New(c) // raw syscalls: the client's "done" comes just before the loop
	theirs, err = readDests(rc, len(mine))
	if err != nil {
		return nil, nil, failf("Couldn't read remote address: %v", err)
	}
	if err := connect(c, theirs); err != nil {
		return nil, nil, err
	}
	for _, d := range mine {
		if err := rc.WriteAll(d.encode()); err != nil {
			return nil, nil, failure("Couldn't send/recv local address")
		}
	}
	// rdma-core reads the client's "done" with one read() of up to msgSize
	// bytes; a client that closes without it is an error there too. The
	// deadline is lifted after it (a timer's removal makes no syscall).
	c.SetReadDeadline(time.Now().Add(time.Minute))
	var b [msgSize]byte
	n, err := rc.ReadAtLeast(b[:], len(done))
	if err != nil || string(b[:n]) != string(done) {
		return nil, nil, failure("Couldn't send/recv local address")
	}
	c.SetReadDeadline(time.Time{})
	return theirs, c, nil
}

// readDests reads n messages of msgSize bytes.
func readDests(r rawconn.Conn, n int) ([]dest, error) {
	ds := make([]dest, n)
	var b [msgSize]byte
	for i := range ds {
		if err := r.ReadFull(b[:]); err != nil {
			return nil, fmt.Errorf("message %d of %d: %v", i+1, n, err)
		}
		d, err := decodeDest(b[:])
		if err != nil {
			return nil, err
		}
		ds[i] = d
	}
	return ds, nil
}

// failure is an error whose text is what rdma-core's examples print
// (capitalized, as they are).
type failure string

func (f failure) Error() string { return string(f) }

func failf(format string, args ...any) error { return failure(fmt.Sprintf(format, args...)) }
