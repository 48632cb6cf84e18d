package rsocket_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rsocket"
)

// TestMain lets the test binary be the peer that gets killed.
func TestMain(m *testing.M) {
	if addr := os.Getenv("RSOCKET_TEST_WRITER"); addr != "" {
		writer(addr)
		return
	}
	os.Exit(m.Run())
}

// writer dials addr and writes until it is killed.
func writer(addr string) {
	c, err := rsocket.Dial(context.Background(), "tcp", addr)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(2)
	}
	b := pattern(64<<10, 7)
	for {
		if _, err := c.Write(b); err != nil {
			os.Exit(3)
		}
	}
}

// faultPaths are the devices the fault tests run on: rxe0 (RoCE) and siw0
// (iWARP: rsocket's message variant, and the kernel's own TCP connection
// underneath, which a killed process's exit closes).
var faultPaths = []path{paths[0], paths[2]}

// forPaths runs f as a subtest on each of faultPaths.
func forPaths(t *testing.T, f func(t *testing.T, p path)) {
	rigtest.Require(t)
	for _, p := range faultPaths {
		t.Run(p.name, func(t *testing.T) { f(t, p) })
	}
}

// TestRigPeerKilled: the peer process dies mid-stream (SIGKILL, so no
// DISCONNECT message): Read returns ECONNRESET once the buffered bytes are
// read, it does not hang.
func TestRigPeerKilled(t *testing.T) { forPaths(t, testPeerKilled) }

func testPeerKilled(t *testing.T, p path) {
	l := listenerOn(t, p, rsocket.Config{})
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "RSOCKET_TEST_WRITER="+l.Addr().String())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.ReadFull(c, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	c.SetReadDeadline(time.Now().Add(2 * time.Minute))
	buf := make([]byte, 64<<10)
	total := 0
	for {
		n, err := c.Read(buf)
		total += n
		if err == nil {
			continue
		}
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("Read after the peer was killed (%d bytes drained): %v, want ECONNRESET", total, err)
		}
		t.Logf("Read after the peer was killed: %v (after %d buffered bytes)", err, total)
		break
	}
	if _, err := c.Write([]byte("x")); err == nil {
		t.Error("Write to a killed peer succeeded")
	}
}

// TestRigWriteDeadline: a Write blocked on a peer that does not read
// returns a timeout when its deadline passes, having written n bytes; the
// stream goes on after the deadline is cleared, and the peer reads exactly
// the bytes Write reported, in order.
func TestRigWriteDeadline(t *testing.T) { forPaths(t, testWriteDeadline) }

func testWriteDeadline(t *testing.T, p path) {
	client, server := pair(t, p, rsocket.Config{})
	data := pattern(8<<20, 3)
	client.SetWriteDeadline(time.Now().Add(3 * time.Second))
	n, err := client.Write(data)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write to a peer that does not read: %d bytes, %v; want a timeout", n, err)
	}
	if n == 0 || n >= len(data) {
		t.Fatalf("Write wrote %d of %d bytes before its deadline", n, len(data))
	}
	t.Logf("blocked Write timed out after %d bytes: %v", n, err)
	client.SetWriteDeadline(time.Time{})
	done := make(chan error, 1)
	go func() {
		_, err := client.Write(data[n:])
		if err == nil {
			err = client.(interface{ CloseWrite() error }).CloseWrite()
		}
		done <- err
	}()
	got, err := io.ReadAll(server)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("%d bytes read, want %d: %s", len(got), len(data), firstDiff(got, data))
	}
}

// TestRigCloseUnblocks: Close from another goroutine wakes a blocked Read
// and a blocked Write with net.ErrClosed.
func TestRigCloseUnblocks(t *testing.T) { forPaths(t, testCloseUnblocks) }

func testCloseUnblocks(t *testing.T, p path) {
	_, reader := pair(t, p, rsocket.Config{}) // nobody writes to it
	writer, _ := pair(t, p, rsocket.Config{}) // nobody reads from it
	rerr := make(chan error, 1)
	go func() {
		_, err := reader.Read(make([]byte, 10))
		rerr <- err
	}()
	werr := make(chan error, 1)
	go func() {
		_, err := writer.Write(make([]byte, 64<<20))
		werr <- err
	}()
	time.Sleep(2 * time.Second)
	go reader.Close()
	go writer.Close()
	for name, ch := range map[string]chan error{"Read": rerr, "Write": werr} {
		select {
		case err := <-ch:
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("%s after Close: %v, want net.ErrClosed", name, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s still blocked a minute after Close", name)
		}
	}
}

// TestRigCloseWrite: after CloseWrite the peer reads everything, then
// io.EOF, and can still answer.
func TestRigCloseWrite(t *testing.T) { forPaths(t, testCloseWrite) }

func testCloseWrite(t *testing.T, p path) {
	client, server := pair(t, p, rsocket.Config{})
	msg := pattern(300<<10, 9)
	go func() {
		client.Write(msg)
		client.(*rsocket.Conn).CloseWrite()
	}()
	got, err := io.ReadAll(server)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("ReadAll after CloseWrite: %d bytes, %v", len(got), err)
	}
	if _, err := server.Write([]byte("reply")); err != nil {
		t.Fatal(err)
	}
	server.Close()
	reply, err := io.ReadAll(client)
	if err != nil || string(reply) != "reply" {
		t.Fatalf("the half-closed side read %q, %v", reply, err)
	}
}

func openFDs(t *testing.T) int {
	d, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(d)
}

// TestRigShortConns makes short connections (connect, one byte each way,
// close), RSOCKET_CONNS_PAR (default 1) at a time, and checks that file
// descriptors and goroutines come back to where they were. make test runs
// 100; issue 17's scale is RSOCKET_CONNS=10000. (A false ECONNRESET once
// in ~3,000 connections under load is what TestRigDisconnectOvertakesData
// now provokes and checks.)
func TestRigShortConns(t *testing.T) {
	rigtest.Require(t)
	conns, par := envInt(t, "RSOCKET_CONNS", 100), envInt(t, "RSOCKET_CONNS_PAR", 1)
	l := listener(t, rsocket.Config{SendBuffer: 8 << 10, RecvBuffer: 8 << 10, SendQueue: 16, RecvQueue: 16})
	// During the warm-up each side first times out on a read, so each
	// side's context has parked in CQ.Wait (which starts, once per context,
	// its device watch: 1 fd and a goroutine); timedOut carries the
	// server's "done" to the client.
	var warming atomic.Bool
	timedOut := make(chan error, 1)
	timeoutRead := func(c net.Conn) error {
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		c.SetReadDeadline(time.Time{})
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("a read before the peer wrote: %v; want a timeout", err)
		}
		return nil
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			warm := warming.Load()
			go func() {
				defer c.Close()
				if warm {
					timedOut <- timeoutRead(c)
				}
				b := make([]byte, 1)
				if _, err := io.ReadFull(c, b); err == nil {
					c.Write(b)
				}
			}()
		}
	}()
	one := func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		d := rsocket.Dialer{Config: rsocket.Config{SendBuffer: 8 << 10, RecvBuffer: 8 << 10, SendQueue: 16, RecvQueue: 16}}
		c, err := d.DialContext(ctx, "tcp", l.Addr().String())
		if err != nil {
			return fmt.Errorf("connection %d: %v", i, err)
		}
		defer c.Close()
		if warming.Load() {
			if err := timeoutRead(c); err != nil {
				return fmt.Errorf("warm-up connection %d, client: %v", i, err)
			}
			if err := <-timedOut; err != nil {
				return fmt.Errorf("warm-up connection %d, server: %v", i, err)
			}
		}
		b := []byte{byte(i)}
		if _, err := c.Write(b); err != nil {
			return fmt.Errorf("connection %d: %v", i, err)
		}
		if _, err := io.ReadFull(c, b); err != nil || b[0] != byte(i) {
			return fmt.Errorf("connection %d: read %v %v", i, b, err)
		}
		if n, err := c.Read(b); n != 0 || err != io.EOF {
			return fmt.Errorf("connection %d: read after the byte: %d, %v; want io.EOF", i, n, err)
		}
		if err := c.Close(); err != nil {
			return fmt.Errorf("connection %d: Close: %v", i, err)
		}
		return nil
	}
	// Warm up: the dial channel, each device's context and its watcher
	// (started by the first blocking wait) stay for the process; what must
	// not grow is what each connection adds. The first three connections
	// make both sides block (CI once measured the baseline before the
	// accepting side had ever parked: 20 plain warm-ups never waited there,
	// and the lazy start counted as a leak of 1 fd and 2 goroutines: the
	// watch's and, before waiters read their channel themselves, the
	// channel's dispatcher).
	warming.Store(true)
	for i := 0; i < 3; i++ {
		if err := one(-1 - i); err != nil {
			t.Fatal(err)
		}
	}
	warming.Store(false)
	for i := 0; i < 20; i++ {
		if err := one(-1 - i); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second)
	fds, gs := openFDs(t), runtime.NumGoroutine()
	start := time.Now()
	var next, failed atomic.Int64
	errc := make(chan error, par)
	for w := 0; w < par; w++ {
		go func() {
			for failed.Load() == 0 {
				i := int(next.Add(1)) - 1
				if i >= conns {
					break
				}
				if err := one(i); err != nil {
					failed.Add(1)
					errc <- err
					return
				}
				if i%1000 == 999 {
					t.Logf("%d connections, %v, %d fds, %d goroutines", i+1, time.Since(start).Round(time.Second), openFDs(t), runtime.NumGoroutine())
				}
			}
			errc <- nil
		}()
	}
	for w := 0; w < par; w++ {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		return
	}
	var fds2, gs2 int
	for try := 0; try < 50; try++ {
		time.Sleep(200 * time.Millisecond)
		if fds2, gs2 = openFDs(t), runtime.NumGoroutine(); fds2 <= fds && gs2 <= gs {
			break
		}
	}
	t.Logf("%d connections in %v: fds %d → %d, goroutines %d → %d", conns, time.Since(start).Round(time.Second), fds, fds2, gs, gs2)
	if fds2 > fds || gs2 > gs {
		buf := make([]byte, 1<<20)
		t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
		d, _ := os.ReadDir("/proc/self/fd")
		for _, e := range d {
			p, _ := os.Readlink("/proc/self/fd/" + e.Name())
			t.Logf("fd %s → %s", e.Name(), p)
		}
		t.Errorf("after %d connections: fds %d → %d, goroutines %d → %d", conns, fds, fds2, gs, gs2)
	}
}

// TestRigDisconnectOvertakesData: the server writes one byte and closes at
// once; the client's poll of its CQ (empty: the byte is not there yet) is
// held up before it looks at the CM, long enough for the byte, the
// DISCONNECT message and the CM's DISCONNECTED event to all arrive. The
// client must read the byte and then io.EOF, not ECONNRESET (the false
// reset TestRigShortConns saw once in ~3,000 connections under load).
func TestRigDisconnectOvertakesData(t *testing.T) {
	rigtest.Require(t)
	const conns = 20
	cfg := rsocket.Config{SendBuffer: 8 << 10, RecvBuffer: 8 << 10, SendQueue: 16, RecvQueue: 16}
	l := listener(t, cfg)
	var slow atomic.Pointer[net.Conn]
	var closed, overtaken atomic.Int32 // server conns closed; client holds that saw one close
	rsocket.SetTestHookBeforeCM(func(c net.Conn) {
		if p := slow.Load(); p != nil && *p == c {
			before := closed.Load()
			time.Sleep(50 * time.Millisecond)
			if closed.Load() != before {
				overtaken.Add(1)
			}
		}
	})
	t.Cleanup(func() { rsocket.SetTestHookBeforeCM(nil) })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				b := make([]byte, 1)
				if _, err := io.ReadFull(c, b); err == nil {
					c.Write(b)
				}
				c.Close()
				closed.Add(1)
			}()
		}
	}()
	for i := 0; i < conns; i++ {
		d := rsocket.Dialer{Config: cfg}
		c, err := d.DialContext(rigCtx(t, time.Minute), "tcp", l.Addr().String())
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		b := []byte{byte(i)}
		if _, err := c.Write(b); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		slow.Store(&c)
		if _, err := io.ReadFull(c, b); err != nil || b[0] != byte(i) {
			t.Fatalf("connection %d: read %v, %v; want [%d]", i, b, err, byte(i))
		}
		if n, err := c.Read(b); n != 0 || err != io.EOF {
			t.Fatalf("connection %d: read after the byte: %d, %v; want io.EOF", i, n, err)
		}
		slow.Store(nil)
		if err := c.Close(); err != nil {
			t.Fatalf("connection %d: Close: %v", i, err)
		}
	}
	t.Logf("%d connections: %d times the server closed while the client was between its poll and its look at the CM", conns, overtaken.Load())
	if overtaken.Load() == 0 {
		t.Errorf("the server never closed inside the client's window: the test did not exercise the race")
	}
}

// TestRigIWARPCloseWaitsForPeer: on siw0 a Close after writing waits until
// the peer has read every byte or closed, before it disconnects (see
// iwarpLinger: a send completes there once it is in TCP, and an early
// disconnect can reset the stream under the peer's last bytes). The
// server writes and closes; the client reads what was written, then:
//   - closes 100 ms later: the server's Close returns after the client's
//     began, its linger ended by the client's DISCONNECT;
//   - stays open: the server's Close still returns (the linger is bounded);
//   - read exactly half its receive buffer, which makes it send credits
//     counting the message read: the server's Close needs no DISCONNECT.
func TestRigIWARPCloseWaitsForPeer(t *testing.T) {
	rigtest.Require(t)
	p := paths[2] // siw0
	const rbuf = 128 << 10
	cases := []struct {
		name       string
		size       int
		peerCloses bool
		wantLinger []string
	}{
		{"peer closes", 1000, true, []string{"peer closed"}},
		{"peer stays", 1000, false, []string{"timed out"}},
		{"peer read all", rbuf / 2, false, []string{"not needed", "peer read all"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client, server := pair(t, p, rsocket.Config{RecvBuffer: rbuf})
			data := pattern(tc.size, 7)
			type closed struct {
				at  time.Time
				err error
			}
			srv := make(chan closed, 1)
			read := make(chan struct{})
			go func() {
				if _, err := server.Write(data); err != nil {
					srv <- closed{time.Now(), fmt.Errorf("Write: %v", err)}
					return
				}
				<-read
				err := server.Close()
				srv <- closed{time.Now(), err}
			}()
			got := make([]byte, tc.size)
			if _, err := io.ReadFull(client, got); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("client read %v; want the %d bytes written", err, len(data))
			}
			close(read)
			var r closed
			if tc.peerCloses {
				time.Sleep(100 * time.Millisecond) // the server waits in Close meanwhile (iwarpLinger: 500 ms)
				select {
				case r = <-srv:
					t.Fatalf("the server's Close returned (%v) before the client closed", r.err)
				default:
				}
				began := time.Now()
				if err := client.Close(); err != nil {
					t.Fatalf("client Close: %v", err)
				}
				r = <-srv
				if r.at.Before(began) {
					t.Errorf("the server's Close returned %v before the client's began", began.Sub(r.at))
				}
			} else {
				select {
				case r = <-srv:
				case <-time.After(30 * time.Second):
					t.Fatal("the server's Close has not returned 30 s after the client read all, the client still open")
				}
				if n, err := client.Read(got[:1]); n != 0 || err != io.EOF {
					t.Errorf("client Read after the server closed: %d, %v; want io.EOF", n, err)
				}
			}
			if r.err != nil {
				t.Errorf("server Close: %v", r.err)
			}
			if l := rsocket.Lingered(server); !slices.Contains(tc.wantLinger, l) {
				t.Errorf("the server's linger ended %q, want one of %q", l, tc.wantLinger)
			}
		})
	}
}
