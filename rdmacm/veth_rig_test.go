package rdmacm_test

import (
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rdmacm"
)

// TestRigVethRouteChoice pins down which device the kernel's CM picks for
// a destination on the rig's veth pair (test/rig/guest/veth-pair.sh), and
// so why a client must name its source there: both ends of the pair are
// addresses of one host, and the rig's policy routing sends traffic out of
// va or vb only for a lookup that names its output interface (rules
// "oif va lookup 101", "oif vb lookup 102", ahead of the local table).
//
//   - ResolveAddr from 10.99.0.1 to 10.99.0.2: the source's device, rxea
//     (binding the source sets the ID's bound interface, so the route
//     lookup names va and leaves by it): the connection crosses the veth.
//   - ResolveAddr to 10.99.0.2 with no source: the lookup names no
//     interface, the local table answers (10.99.0.2 is this host's), and
//     the CM binds the ID to the device that holds the destination, rxeb,
//     with the destination as its own source: a loopback on rxeb, not a
//     crossing.
//
// rdma-core's perftest 4.5-0.17 (bookworm's, the rig's) cannot name its
// source for the CM: its --source_ip is the raw-Ethernet client address
// (the first of its two long options of that name), so its -R client
// always resolves with no source (cmd/perftest's TestRigPerftestNoSource).
func TestRigVethRouteChoice(t *testing.T) {
	rigtest.Require(t)
	rigtest.Device(t, "rxea")
	rigtest.Device(t, "rxeb")
	ch, err := rdmacm.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	dst := netip.AddrPortFrom(addrRXEB, 7999)
	for _, c := range []struct {
		name     string
		src      netip.Addr
		dev      string
		localSrc netip.Addr
	}{
		{"source-10.99.0.1", addrRXEA, "rxea", addrRXEA},
		{"no-source", netip.Addr{}, "rxeb", addrRXEB},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := rigCtx(t, 30*time.Second)
			id, err := ch.CreateID(rdmacm.PSTCP)
			if err != nil {
				t.Fatal(err)
			}
			defer id.Close()
			var src netip.AddrPort
			if c.src.IsValid() {
				src = netip.AddrPortFrom(c.src, 0)
			}
			if err := id.ResolveAddr(ctx, src, dst); err != nil {
				t.Fatal(err)
			}
			if got := id.Device().Name; got != c.dev {
				t.Errorf("the CM chose %s, want %s", got, c.dev)
			}
			la, err := id.LocalAddr()
			if err != nil {
				t.Fatal(err)
			}
			if la.Addr() != c.localSrc {
				t.Errorf("source address %v, want %v", la.Addr(), c.localSrc)
			}
			if err := id.ResolveRoute(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRigVethPerftestNoSource: perftest's -R client, told -d rxea and
// --source_ip 10.99.0.1, connects to 10.99.0.2 from 10.99.0.2 — with no
// source, like TestRigVethRouteChoice's second case. A goverbs listener on
// 10.99.0.2 reads the connection request's source address and rejects it.
// This is why cmd/perftest's TestInteropRDMACMRig runs no perftest client
// across the veth: its connection is a loopback on rxeb, whose REP the
// kernel addresses to the MAC that answers ARP for 10.99.0.2 out of vb
// (va's), so it leaves the device and is dropped by rxea; the REQ times out
// (UNREACHABLE) and the server's REP too.
func TestRigVethPerftestNoSource(t *testing.T) {
	rigtest.Require(t)
	rigtest.Device(t, "rxea")
	rigtest.Device(t, "rxeb")
	ctx := rigCtx(t, 60*time.Second)
	l, err := rdmacm.Listen(netip.AddrPortFrom(addrRXEB, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := strconv.Itoa(int(l.Addr().Port()))
	wait := startTool(t, ctx, "ib_send_lat", "-R", "-d", "rxea", "--source_ip", addrRXEA.String(), "-p", port, "-n", "5", addrRXEB.String())
	r, err := l.Accept(ctx)
	if err != nil {
		out, _ := wait()
		t.Fatalf("no connection request from perftest: %v\n%s", err, out)
	}
	ra, err := r.ID.RemoteAddr()
	if err != nil {
		t.Fatal(err)
	}
	la, err := r.ID.LocalAddr()
	if err != nil {
		t.Fatal(err)
	}
	r.Reject([]byte("goverbs: test over"))
	out, werr := wait()
	t.Logf("perftest's request: from %v to %v; perftest: %v", ra, la, werr)
	if ra.Addr() != addrRXEB || la.Addr() != addrRXEB {
		t.Errorf("perftest's request came from %v to %v, want from and to %v (a loopback on rxeb: no source given to the CM)\n%s", ra, la, addrRXEB, out)
	}
	if werr == nil {
		t.Errorf("perftest's client succeeded although its request was rejected:\n%s", out)
	}
}
