package rdmacm_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

const mcSlot = ucmSize + 40 // a UD receive has the 40-byte GRH first

// mcAttempts bounds the tries of one multicast exchange, each on its own
// group.
//
// Why tries: rdma-core's mckey sender posts its sends unsignaled, then
// leaves the group and exits without waiting for them. On Linux 6.1 rxe
// transmits a user QP's sends inside the post (process context), so all
// of them reach the wire; from 6.4 on rxe transmits from a work queue, and
// a sender that exits first destroys its QP with sends still queued: they
// never leave (seen on 6.12 under load: rxe0's sent_pkts rose by 1, 0 and
// 10 for three runs of 10 sends, for mckey's own receiver as for
// goverbs'). So the receiving test counts what rxe0 put on the wire
// (hw_counters/sent_pkts; nothing else sends on rxe0 meanwhile) and fails
// if goverbs received fewer; it retries while mckey sent nothing (one
// try with datagrams on the wire is the check: more only cost time).
const mcAttempts = 5

// mcSends is how many datagrams mckey sends a try: more than the other
// interop tests' ten, so that some leave before it exits (on newest, 7.3,
// under load, none of 5 × 10 did).
const mcSends = 50

// rxeCounter reads one of rxe0's port counters.
func rxeCounter(t *testing.T, name string) uint64 {
	t.Helper()
	// The core caches a device's hw_counters for their lifespan
	// (RDMA_HW_STATS_DEFAULT_LIFESPAN, 10 ms; drivers/infiniband/core/
	// sysfs.c update_hw_stats): a read within it of the last one returns
	// the old values. 6.1's rxe sends inside the post, so ten sends can
	// complete within 10 ms of the read before them (seen: "10 send
	// completions but rxe0 transmitted 0 packets").
	time.Sleep(50 * time.Millisecond)
	b, err := os.ReadFile("/sys/class/infiniband/rxe0/ports/1/hw_counters/" + name)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}

// igmpJoined reports whether eth0 (rxe0's netdev) is an IGMP member of
// the IPv4 group: the kernel's CM joins it for a RoCEv2 full member, not
// for a send-only one.
func igmpJoined(t *testing.T, group netip.Addr) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/net/igmp")
	if err != nil {
		t.Fatal(err)
	}
	a := group.As4()
	hex := fmt.Sprintf("%02X%02X%02X%02X", a[3], a[2], a[1], a[0]) // a __be32 printed as a host integer
	dev := ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && !strings.HasPrefix(line, "\t") && f[2] == ":" { // "2	eth0      :     1      V3"
			dev = f[1]
			continue
		}
		if dev == "eth0" && len(f) > 0 && f[0] == hex {
			return true
		}
	}
	return false
}

// TestRigInteropMckeySender: goverbs joins and receives, rdma-core's mckey
// sends to the group. Every datagram rxe0 transmitted must arrive.
func TestRigInteropMckeySender(t *testing.T) {
	rigtest.Require(t)
	group := netip.MustParseAddr("239.1.1.2")
	total := 0
	for try := 1; try <= mcAttempts && total == 0; try, group = try+1, group.Next() {
		total += mckeySendsTo(t, group)
	}
	if total == 0 {
		t.Fatalf("rdma-core's mckey transmitted nothing in %d tries (rxe0's sent_pkts did not move)", mcAttempts)
	}
}

// mckeySendsTo runs one exchange on group and returns how many datagrams
// mckey put on the wire, all of which goverbs received.
func mckeySendsTo(t *testing.T, group netip.Addr) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var b *buffers
	c, m, err := rdmacm.JoinGroup(ctx, netip.AddrPortFrom(group, 0), false, &rdmacm.Config{Source: netip.AddrPortFrom(addrRXE0, 0),
		Cap: uverbs.QPCap{MaxSendWR: mcSends, MaxRecvWR: mcSends, MaxSendSGE: 1, MaxRecvSGE: 1},
		Prepare: func(c *rdmacm.Conn) error {
			b = newBuffers(t, c.PD(), mcSends*mcSlot)
			return postRecvs(c, b, mcSends, mcSlot)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer m.Leave()
	t.Logf("joined %v: QPN %#x QKey %#x DGID %x", m.Addr(), m.UD.QPN, m.UD.QKey, m.UD.AH.GRH.DGID)
	sent0, rcvd0 := rxeCounter(t, "sent_pkts"), rxeCounter(t, "rcvd_pkts")
	out, err := startTool(t, ctx, "mckey", "-m", group.String(), "-b", addrRXE0.String(), "-s", "-C", strconv.Itoa(mcSends), "-S", strconv.Itoa(ucmSize))()
	if err != nil || !strings.Contains(out, "data transfers complete") {
		t.Fatalf("mckey sender: %v\n%s", err, out)
	}
	time.Sleep(time.Second) // anything still in rxe's work queue
	sent := int(rxeCounter(t, "sent_pkts") - sent0)
	rcvd := int(rxeCounter(t, "rcvd_pkts") - rcvd0)
	t.Logf("mckey posted %d sends; rxe0 transmitted %d and received %d", mcSends, sent, rcvd)
	if sent > mcSends {
		t.Fatalf("rxe0 transmitted %d packets for mckey's %d sends: something else sent on rxe0", sent, mcSends)
	}
	if sent > 0 {
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		err = waitN(wctx, c, sent)
		wcancel()
		if err != nil {
			t.Fatalf("goverbs received fewer than the %d datagrams rxe0 transmitted (it received %d): %v", sent, rcvd, err)
		}
	}
	// No completion beyond what was sent.
	var wc [4]uverbs.WorkCompletion
	if n, err := c.CQ.Poll(wc[:]); err != nil || n != 0 {
		t.Fatalf("CQ after %d receives: %d more completions (%v)", sent, n, err)
	}
	if err := m.Leave(); err != nil {
		t.Error("Leave:", err)
	}
	return sent
}

// TestRigInteropMckeyReceiver: rdma-core's mckey joins and receives,
// goverbs joins as a send-only member and sends; mckey must receive them
// all (goverbs waits for its sends' completions, so they are on the wire).
func TestRigInteropMckeyReceiver(t *testing.T) {
	rigtest.Require(t)
	group := netip.MustParseAddr("239.1.1.10")
	var errs []string
	for try := 1; try <= 3; try, group = try+1, group.Next() {
		err := sendToMckey(t, group)
		if err == nil {
			return
		}
		t.Logf("try %d on %v: %v", try, group, err)
		errs = append(errs, err.Error())
	}
	t.Fatalf("mckey never received every datagram goverbs sent:\n%s", strings.Join(errs, "\n"))
}

func sendToMckey(t *testing.T, group netip.Addr) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wait := startTool(t, ctx, "mckey", "-m", group.String(), "-b", addrRXE0.String(), "-C", strconv.Itoa(ucmCount), "-S", strconv.Itoa(ucmSize))
	// mckey posts its receives, joins (the kernel's CM then joins eth0 to
	// the IPv4 group) and attaches its QP on the join event.
	for !igmpJoined(t, group) {
		if ctx.Err() != nil {
			out, err := wait()
			return fmt.Errorf("mckey never joined (%v):\n%s", err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // the attach follows the join event
	var b *buffers
	c, m, err := rdmacm.JoinGroup(ctx, netip.AddrPortFrom(group, 0), true, &rdmacm.Config{Source: netip.AddrPortFrom(addrRXE0, 0), SignalAll: true,
		Cap: uverbs.QPCap{MaxSendWR: ucmCount, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1},
		Prepare: func(c *rdmacm.Conn) error {
			b = newBuffers(t, c.PD(), 4096)
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer m.Leave()
	sent0 := rxeCounter(t, "sent_pkts")
	for i := 0; i < ucmCount; i++ {
		wr := uverbs.SendWR{ID: uint64(i), Opcode: uverbs.WRSendWithImm, Imm: c.QP.QPN(), SGL: b.sge(0, ucmSize),
			UD: uverbs.UDDest{AH: c.AH, RemoteQPN: m.UD.QPN, QKey: m.UD.QKey}}
		if _, err := c.QP.PostSend([]uverbs.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
	}
	if err := waitN(ctx, c, ucmCount); err != nil {
		t.Fatal(err) // the sends' own completions: local, never lost
	}
	if sent := rxeCounter(t, "sent_pkts") - sent0; sent != ucmCount {
		t.Fatalf("%d send completions but rxe0 transmitted %d packets", ucmCount, sent)
	}
	if out, err := wait(); err != nil || !strings.Contains(out, "data transfers complete") {
		return fmt.Errorf("mckey receiver did not get every message (%v):\n%s", err, out)
	}
	return nil
}
