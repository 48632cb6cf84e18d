package rdmacm_test

import (
	"bytes"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

const mcSlot = ucmSize + 40 // a UD receive has the 40-byte GRH first

// TestRigInteropMckeySender: goverbs joins and receives, rdma-core's mckey
// sends to the group.
func TestRigInteropMckeySender(t *testing.T) {
	rigtest.Require(t)
	ctx := rigCtx(t, 90*time.Second)
	group := netip.MustParseAddrPort("239.1.1.2:0")
	var b *buffers
	c, m, err := rdmacm.JoinGroup(ctx, group, false, &rdmacm.Config{Source: netip.AddrPortFrom(addrRXE0, 0),
		Cap: uverbs.QPCap{MaxSendWR: ucmCount, MaxRecvWR: ucmCount, MaxSendSGE: 1, MaxRecvSGE: 1},
		Prepare: func(c *rdmacm.Conn) error {
			b = newBuffers(t, c.PD(), ucmCount*mcSlot)
			return postRecvs(c, b, ucmCount, mcSlot)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer m.Leave()
	t.Logf("joined %v: QPN %#x QKey %#x DGID %x", m.Addr(), m.UD.QPN, m.UD.QKey, m.UD.AH.GRH.DGID)
	wait := tool(t, ctx, "mckey", "-m", group.Addr().String(), "-b", addrRXE0.String(), "-s", "-C", strconv.Itoa(ucmCount), "-S", strconv.Itoa(ucmSize))
	err = waitN(ctx, c, ucmCount)
	out := wait()
	if err != nil {
		t.Fatalf("receiving from mckey: %v; mckey said:\n%s", err, out)
	}
	t.Logf("mckey sender:\n%s", out)
	if err := m.Leave(); err != nil {
		t.Error("Leave:", err)
	}
}

// TestRigInteropMckeyReceiver: rdma-core's mckey joins and receives,
// goverbs joins and sends.
func TestRigInteropMckeyReceiver(t *testing.T) {
	rigtest.Require(t)
	ctx := rigCtx(t, 90*time.Second)
	group := netip.MustParseAddrPort("239.1.1.3:0")
	wait := tool(t, ctx, "mckey", "-m", group.Addr().String(), "-b", addrRXE0.String(), "-C", strconv.Itoa(ucmCount), "-S", strconv.Itoa(ucmSize))
	time.Sleep(1500 * time.Millisecond) // mckey posts its receives before it joins
	var b *buffers
	c, m, err := rdmacm.JoinGroup(ctx, group, true, &rdmacm.Config{Source: netip.AddrPortFrom(addrRXE0, 0), SignalAll: true,
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
	for i := 0; i < ucmCount; i++ {
		wr := uverbs.SendWR{ID: uint64(i), Opcode: uverbs.WRSendWithImm, Imm: c.QP.QPN(), SGL: b.sge(0, ucmSize),
			UD: uverbs.UDDest{AH: c.AH, RemoteQPN: m.UD.QPN, QKey: m.UD.QKey}}
		if _, err := c.QP.PostSend([]uverbs.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
	}
	if err := waitN(ctx, c, ucmCount); err != nil {
		t.Fatal(err)
	}
	if out := wait(); !bytes.Contains([]byte(out), []byte("data transfers complete")) {
		t.Errorf("mckey receiver:\n%s", out)
	}
}
