package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/goverbs/goverbs/internal/rawconn"
)

// The out-of-band exchange perftest 4.5 (version string "6.06") runs over
// one TCP connection before, between and after the measurements. Every
// message has a fixed size and both sides send the same sequence; the
// client writes first and then reads, the server reads first and then
// writes, so neither side ever reads ahead of the other.

// ptVersion is the version this program announces: perftest 4.5's. A peer
// refuses anything older than 5.70, and the report exchange uses 64-bit
// iteration counts from 5.33 on.
const ptVersion = "6.06"

// versionLen is sizeof(user_param.version): MAX_VERSION bytes, NUL-padded.
const versionLen = 16

// Sizes of a QP address message: without a GID (gid index -1) and with one,
// each the formatted text and its NUL.
const (
	keyMsgSize    = 4 + 1 + 4 + 1 + 6 + 1 + 6 + 1 + 8 + 1 + 16 + 1 + 8 + 1            // 59
	keyMsgSizeGID = 4 + 1 + 4 + 1 + 6 + 1 + 6 + 1 + 8 + 1 + 16 + 1 + 16*3 + 8 + 1 + 1 // 108
)

// dest is one QP's address as perftest exchanges it (struct pingpong_dest's
// wire part).
type dest struct {
	lid      uint16
	outReads uint16
	qpn      uint32
	psn      uint32
	rkey     uint32
	vaddr    uint64
	gid      [16]byte
	srqn     uint32
}

// encode formats d as perftest's KEY_PRINT_FMT (withGID false) or
// KEY_PRINT_FMT_GID, NUL-terminated, exactly keyMsgSize or keyMsgSizeGID
// bytes long.
func (d dest) encode(withGID bool) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%04x:%04x:%06x:%06x:%08x:%016x:", d.lid, d.outReads, d.qpn&0xffffff, d.psn&0xffffff, d.rkey, d.vaddr)
	n := keyMsgSize
	if withGID {
		for _, g := range d.gid {
			fmt.Fprintf(&b, "%02x:", g)
		}
		fmt.Fprintf(&b, "%08x:", d.srqn)
		n = keyMsgSizeGID
	} else {
		fmt.Fprintf(&b, "%08x", d.srqn)
	}
	out := make([]byte, n)
	copy(out, b.String())
	return out
}

// decodeDest parses a message encode wrote (or perftest's sprintf did).
func decodeDest(msg []byte, withGID bool) (dest, error) {
	s := string(msg)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	f := strings.Split(s, ":")
	want := 7
	if withGID {
		want = 6 + 16 + 1 + 1 // the text ends with ':', so one empty field
	}
	if len(f) != want {
		return dest{}, failf("malformed address message %q (%d fields, want %d): do both sides use -x?", s, len(f), want)
	}
	var v [6]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i], 16, 64)
		if err != nil {
			return dest{}, failf("malformed address message %q: field %d: %v", s, i+1, err)
		}
		v[i] = n
	}
	d := dest{lid: uint16(v[0]), outReads: uint16(v[1]), qpn: uint32(v[2]), psn: uint32(v[3]), rkey: uint32(v[4]), vaddr: v[5]}
	srq := f[6]
	if withGID {
		for i := range d.gid {
			n, err := strconv.ParseUint(f[6+i], 16, 8)
			if err != nil {
				return dest{}, failf("malformed address message %q: GID byte %d: %v", s, i, err)
			}
			d.gid[i] = byte(n)
		}
		srq = f[22]
	}
	n, err := strconv.ParseUint(srq, 16, 32)
	if err != nil {
		return dest{}, failf("malformed address message %q: SRQ number: %v", s, err)
	}
	d.srqn = uint32(n)
	return d, nil
}

// comm is the connection to the peer: TCP, or an RC connection made with
// rdma_cm (-R, -z; cm.go).
type comm struct {
	conn     net.Conn
	cm       *cmLink
	client   bool
	withGID  bool
	gidIndex int // sent in a binary address message
}

// dial is ethernet_client_connect: connect to the server's port.
func dial(host string, port int) (*comm, error) {
	c, err := net.Dial("tcp4", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, failf("Couldn't connect to %s:%d: %v", host, port, err)
	}
	return &comm{conn: c, client: true}, nil
}

// accept is ethernet_server_connect: listen on port, take one client.
func accept(port int) (*comm, error) {
	l, err := net.Listen("tcp4", ":"+strconv.Itoa(port))
	if err != nil {
		return nil, failf("Couldn't listen to port %d: %v", port, err)
	}
	defer l.Close()
	c, err := l.Accept()
	if err != nil {
		return nil, failf("accept() failed: %v", err)
	}
	return &comm{conn: c}, nil
}

func (c *comm) close() error {
	if c.cm != nil {
		return c.cm.close()
	}
	return c.conn.Close()
}

// xchg sends mine and receives as many bytes from the peer (ctx_xchg_data):
// the client writes first, the server reads first.
func (c *comm) xchg(mine []byte) ([]byte, error) {
	if c.cm != nil {
		return c.xchgCM(mine)
	}
	theirs := make([]byte, len(mine))
	rio := rawconn.New(c.conn) // raw syscalls: the last exchange comes just before a loop
	read := func() error {
		if err := rio.ReadFull(theirs); err != nil {
			return failf("reading %d bytes from the peer: %v", len(theirs), err)
		}
		return nil
	}
	write := func() error {
		if err := rio.WriteAll(mine); err != nil {
			return failf("writing %d bytes to the peer: %v", len(mine), err)
		}
		return nil
	}
	first, second := read, write
	if c.client {
		first, second = write, read
	}
	if err := first(); err != nil {
		return nil, err
	}
	if err := second(); err != nil {
		return nil, err
	}
	return theirs, nil
}

// xchgCM is xchg over rdma_cm (ctx_xchg_data_rdma).
func (c *comm) xchgCM(mine []byte) ([]byte, error) {
	if c.client {
		if err := c.cm.send(mine); err != nil {
			return nil, failf(" Unable to write to socket/rdma_cm: %v", err)
		}
	}
	if !c.client && !c.cm.heard {
		c.cm.early = mine // sent before the client's message if that is late (cm.go, nudgeEvery)
	}
	theirs, err := c.cm.recv(len(mine))
	c.cm.early = nil
	if err != nil {
		return nil, failf(" Unable to read from socket/rdma_cm: %v", err)
	}
	if !c.client {
		send := c.cm.send
		if c.cm.earlySent {
			c.cm.earlySent = false
			send = func([]byte) error { return c.cm.await(false) } // its completion
		}
		if err := send(mine); err != nil {
			return nil, failf(" Unable to write to socket/rdma_cm: %v", err)
		}
	}
	return theirs, nil
}

// handshake exchanges one QP address (ctx_hand_shake). Both sides call it
// the same number of times; several of them are only synchronisation.
func (c *comm) handshake(mine dest) (dest, error) {
	if c.cm != nil {
		b, err := c.xchgCM(mine.encodeBinary(c.gidIndex))
		if err != nil {
			return dest{}, failf("Failed to exchange data between server and clients: %v", err)
		}
		return decodeBinary(b)
	}
	b, err := c.xchg(mine.encode(c.withGID))
	if err != nil {
		return dest{}, failf("Failed to exchange data between server and clients: %v", err)
	}
	return decodeDest(b, c.withGID)
}

// versions is exchange_versions and check_version_compatibility: the
// peer's version string, refused if older than 5.70.
func (c *comm) versions() (string, error) {
	mine := make([]byte, versionLen)
	copy(mine, ptVersion)
	b, err := c.xchg(mine)
	if err != nil {
		return "", failf("Failed to exchange data between server and clients: %v", err)
	}
	s := string(b)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	if v := atof(s); v < 5.70 {
		return s, failf("Current implementation is not compatible with versions older than 5.70 (the peer is %q)", s)
	}
	return s, nil
}

// atof is C's atof for a version string: the longest leading number.
func atof(s string) float64 {
	end := 0
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || s[end] == '.') {
		end++
	}
	v, _ := strconv.ParseFloat(s[:end], 64)
	return v
}

// int32s exchanges one big-endian int32 (check_sys_data's fields).
func (c *comm) int32s(v int32) (int32, error) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(v))
	r, err := c.xchg(b[:])
	if err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(r)), nil
}

// sysData is check_sys_data: both sides use the larger cycle buffer (page
// size) and cache line size.
func (c *comm) sysData(cycle, line int) (int, int, error) {
	rc, err := c.int32s(int32(cycle))
	if err != nil {
		return 0, 0, failf("Failed to exchange Page Size data between server and client: %v", err)
	}
	rl, err := c.int32s(int32(line))
	if err != nil {
		return 0, 0, failf("Failed to exchange Cache Line Size data between server and client: %v", err)
	}
	return max(cycle, int(rc)), max(line, int(rl)), nil
}

// mtu is check_mtu's exchange: each side's MTU enum as "%d" in two bytes;
// both use the smaller valid one.
func (c *comm) mtu(mine int) (int, error) {
	b := make([]byte, 2)
	copy(b, strconv.Itoa(mine))
	r, err := c.xchg(b)
	if err != nil {
		return 0, failf("Failed to exchange data between server and clients: %v", err)
	}
	s := string(r)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	rem, _ := strconv.Atoi(s)
	if rem >= 1 && rem <= 5 && rem < mine {
		return rem, nil
	}
	return mine, nil
}

// bwReport is struct bw_report_data's exchanged part.
type bwReport struct {
	size, iters            uint64
	peak, avg, msgRateMpps float64
}

// bwReports is xchg_bw_reports for a 6.06 peer: size, iters, peak, average
// and message rate, each 8 bytes big-endian (the doubles byte-swapped).
func (c *comm) bwReports(mine bwReport) (bwReport, error) {
	var r bwReport
	u64 := func(v uint64) (uint64, error) {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], v)
		got, err := c.xchg(b[:])
		if err != nil {
			return 0, failf("Failed to exchange data between server and clients: %v", err)
		}
		return binary.BigEndian.Uint64(got), nil
	}
	var err error
	if r.size, err = u64(mine.size); err != nil {
		return r, err
	}
	if r.iters, err = u64(mine.iters); err != nil {
		return r, err
	}
	for _, p := range []struct {
		in  float64
		out *float64
	}{{mine.peak, &r.peak}, {mine.avg, &r.avg}, {mine.msgRateMpps, &r.msgRateMpps}} {
		v, err := u64(math.Float64bits(p.in))
		if err != nil {
			return r, err
		}
		*p.out = math.Float64frombits(v)
	}
	return r, nil
}

// closeConn is ctx_close_connection: one last handshake, then "done" with
// its NUL (nobody reads it), then the socket is closed.
func (c *comm) closeConn(mine dest) error {
	if _, err := c.handshake(mine); err != nil {
		return failf("Failed to close connection between server and client: %v", err)
	}
	if c.cm != nil {
		return nil // no "done" over rdma_cm; the connection closes with the session
	}
	c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := c.conn.Write([]byte("done\x00"))
	c.conn.Close()
	if err != nil {
		return failf("Couldn't write to socket: %v", err)
	}
	return nil
}

// failure is an error whose text is what perftest prints (capitalised, as
// it is).
type failure string

func (f failure) Error() string { return string(f) }

func failf(format string, args ...any) error { return failure(fmt.Sprintf(format, args...)) }
