package rdmacm_test

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// TestRigOptions: TOS and ACK timeout set on the client's ID reach its QP
// through INIT_QP_ATTR; REUSEADDR and AFONLY are accepted.
func TestRigOptions(t *testing.T) {
	rigtest.Require(t)
	ctx := rigCtx(t, 60*time.Second)
	client, _ := pair(t, ctx, netip.Addr{}, addrRXE0, &rdmacm.Config{Setup: func(id *rdmacm.ID) error {
		if err := id.SetReuseAddr(true); err != nil {
			return err
		}
		if err := id.SetTOS(0x20); err != nil {
			return err
		}
		return id.SetAckTimeout(18)
	}})
	a, _, err := client.QP.Query(uverbs.QPAttrTimeout | uverbs.QPAttrAV)
	if err != nil {
		t.Fatal(err)
	}
	if a.Timeout != 18 {
		t.Errorf("QP timeout %d, want 18 (SetAckTimeout)", a.Timeout)
	}
	if a.AH.GRH == nil || a.AH.GRH.TrafficClass != 0x20 {
		t.Errorf("QP address %+v, want traffic class 0x20 (SetTOS)", a.AH.GRH)
	}
	l, err := rdmacm.Listen(netip.MustParseAddrPort("[::]:0"), &rdmacm.Config{Setup: func(id *rdmacm.ID) error { return id.SetAFOnly(true) }})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
}

// netdevOf is the netdev an RDMA device runs on.
func netdevOf(t *testing.T, dev string) string {
	t.Helper()
	d, err := uverbs.DeviceByName(dev)
	if err != nil || len(d.Ports) == 0 || d.Ports[0].Netdev == "" {
		t.Fatalf("netdev of %s: %+v, %v", dev, d, err)
	}
	return d.Ports[0].Netdev
}

// TestRigIPv6 connects over IPv6 on rxe0 (loopback, like the IPv4 case;
// across the veth pair both ends are local addresses and the kernel routes
// them through lo, where no rxe device is): an address is added to rxe0's
// netdev for the test, and its RoCE v2 GID follows.
func TestRigIPv6(t *testing.T) {
	rigtest.Require(t)
	nd := netdevOf(t, "rxe0")
	addr := netip.MustParseAddr("fd00:2::15")
	if out, err := exec.Command("ip", "-6", "addr", "add", addr.String()+"/64", "dev", nd, "nodad").CombinedOutput(); err != nil {
		t.Fatalf("ip addr add: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "-6", "addr", "del", addr.String()+"/64", "dev", nd).Run() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ := exec.Command("sh", "-c", "cat /sys/class/infiniband/rxe0/ports/1/gids/*").CombinedOutput()
		if strings.Contains(string(out), "fd00:0002:0000:0000:0000:0000:0000:0015") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no GID for %v on rxe0:\n%s", addr, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ctx := rigCtx(t, 60*time.Second)
	client, server := pair(t, ctx, netip.Addr{}, addr, nil)
	bc := newBuffers(t, client.PD(), 8192)
	bs := newBuffers(t, server.PD(), 8192)
	exchange(t, ctx, client, server, bc, bs, "ping over IPv6")
	if r, err := server.ID.RemoteAddr(); err != nil || r.Addr() != addr {
		t.Errorf("server sees the client at %v, %v", r, err)
	}
}
