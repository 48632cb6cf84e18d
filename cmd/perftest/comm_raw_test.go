package main

import (
	"bytes"
	"errors"
	"io"
	"net"
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

func TestRawIOTakesTheRawConn(t *testing.T) {
	a, _ := tcpPair(t)
	if newRawIO(a).rc == nil {
		t.Error("a TCP connection's exchange does not take raw syscalls")
	}
	p, q := net.Pipe()
	defer p.Close()
	defer q.Close()
	if newRawIO(p).rc != nil {
		t.Error("a pipe has no RawConn, yet rawIO took one")
	}
}

// TestRawIOReadsAcrossWaits: a message that arrives in two parts is read
// whole, the reader parking on the poller in between; then the peer's
// close before a whole message is io.ErrUnexpectedEOF.
func TestRawIOReadsAcrossWaits(t *testing.T) {
	a, b := tcpPair(t)
	want := []byte("0123456789abcdefghij")
	go func() {
		w := newRawIO(b)
		w.writeAll(want[:10])
		time.Sleep(20 * time.Millisecond)
		w.writeAll(want[10:])
		w.writeAll([]byte("xyz"))
		b.Close()
	}()
	r := newRawIO(a)
	got := make([]byte, len(want))
	if err := r.readFull(got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("readFull = %q, %v; want %q", got, err, want)
	}
	if err := r.readFull(make([]byte, 5)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("readFull of 5 bytes when the peer sent 3 and closed = %v, want io.ErrUnexpectedEOF", err)
	}
}

func TestRawIOKeepsDeadlines(t *testing.T) {
	a, _ := tcpPair(t)
	a.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if err := newRawIO(a).readFull(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("readFull past the read deadline = %v, want os.ErrDeadlineExceeded", err)
	}
}
