package rsocket_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rsocket"
)

// brokenPaths are the devices the broken-connection tests run on: rxe
// (the CM's DISCONNECTED comes first, then rdmacm flushes the QP) and siw
// (iWARP: the kernel moves the QP to ERR and flushes its receives before
// the DISCONNECTED event).
var brokenPaths = []path{paths[0], paths[2]}

// brokenRounds is how many times each broken-connection case runs: the
// order of the flushes and the CM event varies.
const brokenRounds = 5

// TestRigBrokenWakesBlocked: a Read and a Write blocked on a connection
// whose peer disconnects at the CM without rsocket's DISCONNECT message
// (as rdma-core's rstream client does when it gives up on a connection)
// both return ECONNRESET promptly; before, the Read parked in CQ.Wait
// after the flushes were taken and never woke for the CM's event, and the
// Write spun waiting for the CQ.
func TestRigBrokenWakesBlocked(t *testing.T) {
	rigtest.Require(t)
	for _, p := range brokenPaths {
		t.Run(p.name, func(t *testing.T) {
			for round := 0; round < brokenRounds; round++ {
				client, server := pair(t, p, rsocket.Config{})
				rerr := make(chan error, 1)
				go func() {
					_, err := server.Read(make([]byte, 100))
					rerr <- err
				}()
				werr := make(chan error, 1)
				go func() {
					// More than the peer's receive buffer: the client
					// does not read, so this blocks for credits.
					_, err := server.Write(make([]byte, 4<<20))
					werr <- err
				}()
				time.Sleep(300 * time.Millisecond) // both park
				if err := rsocket.Abort(client); err != nil {
					t.Fatalf("round %d: abort: %v", round, err)
				}
				bound := time.After(30 * time.Second)
				for _, w := range []struct {
					op string
					c  chan error
				}{{"Read", rerr}, {"Write", werr}} {
					select {
					case err := <-w.c:
						if !errors.Is(err, syscall.ECONNRESET) {
							t.Errorf("round %d: %s after the peer's abort: %v, want ECONNRESET", round, w.op, err)
						}
					case <-bound:
						t.Fatalf("round %d: %s still blocked 30 s after the peer's abort", round, w.op)
					}
				}
				client.Close()
				server.Close()
			}
		})
	}
}

// TestRigAcceptSkipsAbandoned: a connection the CM reports ESTABLISHED
// but whose peer has given up on it (disconnected at the CM) by the time
// Accept would return it is not handed out; Accept goes on and returns the
// next connection, which works.
func TestRigAcceptSkipsAbandoned(t *testing.T) {
	rigtest.Require(t)
	for _, p := range brokenPaths {
		t.Run(p.name, func(t *testing.T) {
			for round := 0; round < brokenRounds; round++ {
				abandoned(t, p, round)
			}
		})
	}
}

func abandoned(t *testing.T, p path, round int) {
	rigtest.Device(t, p.listenOn)
	ctx := rigCtx(t, 2*time.Minute)
	lc := rsocket.ListenConfig{}
	l, err := lc.Listen(ctx, "tcp", netip.AddrPortFrom(p.listen, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The first connection waits in Accept until its peer has aborted and
	// the CM said so.
	established := make(chan struct{})
	aborted := make(chan struct{})
	first := true
	rsocket.SetTestHookAccepted(func(done <-chan struct{}) {
		if !first {
			return
		}
		first = false
		close(established)
		<-aborted
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("round %d: no DISCONNECTED for the aborted connection in 30 s", round)
		}
	})
	defer rsocket.SetTestHookAccepted(nil)
	type res struct {
		c   net.Conn
		err error
	}
	acc := make(chan res, 1)
	go func() {
		c, err := l.Accept()
		acc <- res{c, err}
	}()
	d := rsocket.Dialer{Source: p.source}
	gone, err := d.DialContext(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("round %d: first dial: %v", round, err)
	}
	<-established
	if err := rsocket.Abort(gone); err != nil {
		t.Fatalf("round %d: abort: %v", round, err)
	}
	close(aborted)
	defer gone.Close()
	select {
	case r := <-acc:
		if r.err != nil {
			t.Fatalf("round %d: Accept failed instead of waiting for the next connection: %v", round, r.err)
		}
		from := r.c.RemoteAddr()
		r.c.Close()
		t.Fatalf("round %d: Accept returned the abandoned connection (from %v)", round, from)
	case <-time.After(time.Second):
	}
	client, err := d.DialContext(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("round %d: second dial: %v", round, err)
	}
	defer client.Close()
	var server net.Conn
	select {
	case r := <-acc:
		if r.err != nil {
			t.Fatalf("round %d: Accept: %v", round, r.err)
		}
		server = r.c
	case <-ctx.Done():
		t.Fatalf("round %d: Accept did not return the second connection", round)
	}
	defer server.Close()
	if got, want := server.RemoteAddr().String(), client.LocalAddr().String(); got != want {
		t.Fatalf("round %d: Accept returned the connection from %s, want the second one from %s", round, got, want)
	}
	msg := pattern(1000, byte(round))
	go client.Write(msg) //nolint:errcheck // the read checks it
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(server, got); err != nil {
		t.Fatalf("round %d: read on the second connection: %v", round, err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("round %d: %s", round, firstDiff(got, msg))
	}
}
