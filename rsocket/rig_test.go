package rsocket_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rsocket"
)

// The rig's addresses (test/rig): rxe0 on eth0, the rxea/rxeb veth pair,
// siw0 (iWARP: rsocket's message variant).
var (
	addrSIW0 = netip.MustParseAddr("10.0.3.15")
	addrRXE0 = netip.MustParseAddr("10.0.2.15")
	addrRXEA = netip.MustParseAddr("10.99.0.1")
	addrRXEB = netip.MustParseAddr("10.99.0.2")
)

// path is a way between two goverbs endpoints in the rig.
type path struct {
	name     string
	listen   netip.Addr // the listener's address
	source   netip.Addr // the dialer's (zero: the kernel's choice)
	listenOn string     // device the listener is on
}

var paths = []path{
	{name: "rxe0", listen: addrRXE0, listenOn: "rxe0"},
	{name: "veth", listen: addrRXEA, source: addrRXEB, listenOn: "rxea"},
	{name: "siw0", listen: addrSIW0, listenOn: "siw0"},
}

// envInt is the integer in the environment variable name, or def.
func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

func rigCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// pair connects a Dialer to a Listener on p and returns both ends.
func pair(t *testing.T, p path, cfg rsocket.Config) (client, server net.Conn) {
	t.Helper()
	rigtest.Device(t, p.listenOn)
	ctx := rigCtx(t, 2*time.Minute)
	lc := rsocket.ListenConfig{Config: cfg}
	l, err := lc.Listen(ctx, "tcp", netip.AddrPortFrom(p.listen, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type res struct {
		c   net.Conn
		err error
	}
	acc := make(chan res, 1)
	go func() {
		c, err := l.Accept()
		acc <- res{c, err}
	}()
	d := rsocket.Dialer{Config: cfg, Source: p.source}
	client, err = d.DialContext(ctx, "tcp", l.Addr().(*rsocket.Addr).String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	r := <-acc
	if r.err != nil {
		t.Fatal(r.err)
	}
	// Both ends close at once, as two programs would: on iWARP a Close
	// waits for the peer's (iwarpLinger).
	t.Cleanup(func() {
		done := make(chan struct{})
		go func() { client.Close(); close(done) }()
		r.c.Close()
		<-done
	})
	return client, r.c
}

// pattern is size bytes that differ per size and position.
func pattern(size int, seed byte) []byte {
	b := make([]byte, size)
	x := uint32(seed) + uint32(size)*2654435761
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
	return b
}

// TestRigEcho sends every size from 1 byte to 16 MiB to an echo server over
// rxe0 (loopback), the veth pair and siw0 (iWARP), and checks every byte
// that comes back.
func TestRigEcho(t *testing.T) {
	rigtest.Require(t)
	sizes := []int{1, 2, 63, 64, 65, 1000, 2047, 2048, 4096, 65535, 65536, 65537, 128 << 10, 1<<20 + 7, 4 << 20, 16 << 20}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			client, server := pair(t, p, rsocket.Config{})
			go io.Copy(server, server) //nolint:errcheck // ends with the connection
			for _, size := range sizes {
				want := pattern(size, 1)
				errc := make(chan error, 1)
				go func() {
					_, err := client.Write(want)
					errc <- err
				}()
				got := make([]byte, size)
				if _, err := io.ReadFull(client, got); err != nil {
					t.Fatalf("size %d: read: %v", size, err)
				}
				if err := <-errc; err != nil {
					t.Fatalf("size %d: write: %v", size, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("size %d: %s", size, firstDiff(got, want))
				}
			}
		})
	}
}

func firstDiff(got, want []byte) string {
	for i := range want {
		if got[i] != want[i] {
			return fmt.Sprintf("byte %d is %#x, want %#x", i, got[i], want[i])
		}
	}
	return "equal"
}
