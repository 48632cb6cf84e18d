package rawconn

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"
)

// tcpPair is a connected loopback TCP pair, closed when t ends.
func tcpPair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	if a, err = net.Dial("tcp4", l.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if b = <-accepted; b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func TestTakesTheRawConn(t *testing.T) {
	a, _ := tcpPair(t)
	if !New(a).Raw() {
		t.Error("a TCP connection does not take raw syscalls")
	}
	p, q := net.Pipe()
	defer p.Close()
	defer q.Close()
	if New(p).Raw() {
		t.Error("a pipe has no RawConn, yet New took one")
	}
}

// TestReadsAcrossWaits: a message that arrives in two parts is read
// whole, the reader parking on the poller in between; then the peer's
// close before a whole message is io.ErrUnexpectedEOF.
func TestReadsAcrossWaits(t *testing.T) {
	a, b := tcpPair(t)
	want := []byte("0123456789abcdefghij")
	go func() {
		w := New(b)
		w.WriteAll(want[:10])
		time.Sleep(20 * time.Millisecond)
		w.WriteAll(want[10:])
		w.WriteAll([]byte("xyz"))
		b.Close()
	}()
	r := New(a)
	got := make([]byte, len(want))
	if err := r.ReadFull(got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("ReadFull = %q, %v; want %q", got, err, want)
	}
	if err := r.ReadFull(make([]byte, 5)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("ReadFull of 5 bytes when the peer sent 3 and closed = %v, want io.ErrUnexpectedEOF", err)
	}
}

func TestKeepsDeadlines(t *testing.T) {
	a, _ := tcpPair(t)
	a.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if err := New(a).ReadFull(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("ReadFull past the read deadline = %v, want os.ErrDeadlineExceeded", err)
	}
}

// TestReadAtLeast: what a read brings beyond min is kept, as
// io.ReadAtLeast does; a peer that closes first is io.EOF.
func TestReadAtLeast(t *testing.T) {
	a, b := tcpPair(t)
	if err := New(b).WriteAll([]byte("done\x00")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := New(a).ReadAtLeast(buf, 4)
	if err != nil || n < 4 || string(buf[:4]) != "done" {
		t.Fatalf("ReadAtLeast = %d %q, %v; want at least \"done\"", n, buf[:n], err)
	}
	if _, err := New(a).ReadAtLeast(buf[:2], 4); !errors.Is(err, io.ErrShortBuffer) {
		t.Errorf("ReadAtLeast of 4 into 2 bytes = %v, want io.ErrShortBuffer", err)
	}
	c, d := tcpPair(t)
	d.Close()
	if n, err := New(c).ReadAtLeast(buf, 4); n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("ReadAtLeast from a closed peer = %d, %v; want 0, io.EOF", n, err)
	}
}

// TestResolved: only a GID naming the connection's peer (IPv4-mapped, or
// the same IPv6 address), or this side's own, counts as resolved.
func TestResolved(t *testing.T) {
	conn, _ := tcpPair(t)
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	peer := conn.RemoteAddr().(*net.TCPAddr).IP.String()
	mapped := func(s string) [16]byte { return netip.MustParseAddr("::ffff:" + s).As16() }
	for _, tc := range []struct {
		c    net.Conn
		gid  [16]byte
		want bool
	}{
		{conn, mapped(peer), true},
		{conn, mapped("192.0.2.1"), false},
		{conn, [16]byte{}, false},
		{conn, netip.MustParseAddr("fe80::1").As16(), false},
		{p1, mapped(peer), false}, // no IP peer
		{nil, mapped(peer), false},
	} {
		if got := Resolved(tc.c, [16]byte{}, tc.gid); got != tc.want {
			t.Errorf("Resolved(%T, ::, %v) = %v, want %v", tc.c, netip.AddrFrom16(tc.gid), got, tc.want)
		}
	}
	own := mapped("192.0.2.7")
	if !Resolved(nil, own, own) || Resolved(conn, [16]byte{}, [16]byte{}) {
		t.Error("own GID not resolved, or a zero GID resolved")
	}
}
