package mlx5

import (
	"testing"

	"github.com/goverbs/goverbs/provider"
)

// TestUMRFence: the WQE after a window bind or invalidation carries the
// initiator small fence (MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE, rdma-core's
// next_fence / fm_cache), in the same PostSend or the next one, unless it
// asks for the full fence itself; the one after it carries none. A bind's
// completion opcode is the request's (BIND_MW or LOCAL_INV: the CQE says
// only UMR), and the type 1 window's bind names no QP.
func TestUMRFence(t *testing.T) {
	q := newRingQP(t)
	q.sq.shape.maxBBs = 3
	q.sq.shape.mws = &q.ctx.mws
	q.ctx.MWAllocated(0x3300, false) // a type 1 window, index 0x33
	q.bf = &bfreg{page: &uarPage{mem: make([]byte, 4096)}, reg: bfRegOffset}
	send := provider.SendWR{Opcode: provider.WRSend}
	bind := provider.SendWR{Opcode: provider.WRBindMW, Bind: provider.MWBind{MWRKey: 0x3300, NewRKey: 0x3301, MRLKey: 1, Addr: 0x1000, Length: 64}}
	fm := func(pos uint32) uint8 { return q.sq.ring[int(pos&(q.sq.cnt-1))*wqeBB+ctrlFmCeSe] }
	if _, err := q.PostSend([]provider.SendWR{bind, send, send}); err != nil {
		t.Fatal(err)
	}
	// bind: 3 WQEBBs at 0; sends at 3 and 4.
	if fm(0) != 0 || fm(3) != ctrlSmallFence || fm(4) != 0 {
		t.Errorf("fm_ce_se of bind, send, send = %#x %#x %#x, want 0 %#x 0", fm(0), fm(3), fm(4), ctrlSmallFence)
	}
	if q.sq.slots[0].op != provider.WCBindMW {
		t.Errorf("the bind's completion opcode is %v", q.sq.slots[0].op)
	}
	if got := be.Uint32(q.sq.ring[wqeBB+mkeyQpnMkey:]); got != 0xffffff01 {
		t.Errorf("type 1 bind: qpn_mkey %#x, want 0xffffff01 (no QP, key byte 1)", got)
	}
	q.sq.tail.Store(q.sq.head) // as if all completed
	inv := provider.SendWR{Opcode: provider.WRLocalInv, InvalidateRKey: 0x4401}
	if _, err := q.PostSend([]provider.SendWR{inv}); err != nil {
		t.Fatal(err)
	}
	h := q.sq.head
	fenced := send
	fenced.Flags = provider.SendFence
	if _, err := q.PostSend([]provider.SendWR{fenced, send}); err != nil {
		t.Fatal(err)
	}
	if fm(h) != ctrlFence || fm(h+1) != 0 {
		t.Errorf("after a LOCAL_INV in the previous call: fm %#x %#x, want the full fence %#x then 0", fm(h), fm(h+1), ctrlFence)
	}
	if q.sq.slots[(h-2)&(q.sq.cnt-1)].op != provider.WCLocalInv {
		t.Errorf("the LOCAL_INV's completion opcode is %v", q.sq.slots[(h-2)&(q.sq.cnt-1)].op)
	}
	q.sq.tail.Store(q.sq.head)
	if _, err := q.PostSend([]provider.SendWR{inv}); err != nil {
		t.Fatal(err)
	}
	h = q.sq.head
	if _, err := q.PostSend([]provider.SendWR{send}); err != nil {
		t.Fatal(err)
	}
	if fm(h) != ctrlSmallFence {
		t.Errorf("the send after a LOCAL_INV posted alone: fm %#x, want %#x", fm(h), ctrlSmallFence)
	}
}
