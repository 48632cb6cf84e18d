package uverbs

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// WRBatch builds send work requests in place and posts them all with one
// doorbell: libibverbs' extended QP posting API (ibv_wr_start, the
// ibv_wr_<opcode> builders, ibv_wr_set_sge, ibv_wr_set_sge_list,
// ibv_wr_set_inline_data, ibv_wr_set_ud_addr, ibv_wr_complete,
// ibv_wr_abort) in Go's shape: a builder whose methods chain.
//
//	b := qp.StartWR()
//	b.RDMAWrite(1, 0, rkey, raddr).SetSGE(lkey, addr, 4096)
//	b.SendWithImm(2, uverbs.SendSignaled, 0x1234).SetSGE(lkey, addr, 64)
//	if err := b.Complete(); err != nil { ... } // nothing was posted
//
// Each opcode method starts the next work request (id, flags, and the
// opcode's own arguments, as ibv_wr_<opcode> after setting qpx->wr_id and
// qpx->wr_flags); the Set methods give the current one its data. Complete
// validates the whole batch and posts it with one provider PostSend (rxe:
// one write() doorbell; mlx5: one MMIO doorbell), or posts nothing and
// returns the error (as ibv_wr_complete does); Abort drops it.
//
// The batch lives in the QP and its storage is allocated on the first
// StartWR (as deep as the send queue, MaxSendSGE entries per request):
// building and posting allocate nothing after that. One goroutine builds a
// QP's batch at a time; PostSend may run meanwhile (the batch touches the
// queue only in Complete). A batch holds at most the send queue's depth.
type WRBatch struct {
	qp   *QP
	wrs  []SendWR
	sges []SGE // backing store of every request's SGL: MaxSendSGE each
	nsge int   // max SGEs per request (the QP's MaxSendSGE, at least 1)
	err  error // the first builder error: Complete returns it
	open bool
}

// StartWR begins a batch of send work requests on the QP (ibv_wr_start).
// An open batch is dropped.
func (qp *QP) StartWR() *WRBatch {
	b := &qp.batch
	if b.qp == nil {
		c := qp.Cap()
		b.qp = qp
		b.nsge = max(int(c.MaxSendSGE), 1)
		depth := max(int(c.MaxSendWR), 1)
		b.wrs = make([]SendWR, 0, depth)
		b.sges = make([]SGE, depth*b.nsge)
	}
	clear(b.wrs)
	b.wrs, b.err, b.open = b.wrs[:0], nil, true
	return b
}

// Len is the number of work requests in the batch.
func (b *WRBatch) Len() int { return len(b.wrs) }

func (b *WRBatch) fail(format string, args ...any) {
	if b.err == nil {
		b.err = &OpError{Verb: "WRBatch", Device: b.qp.pd.ctx.dev.Name,
			Err: fmt.Errorf("%w: work request %d: %s", unix.EINVAL, len(b.wrs), fmt.Sprintf(format, args...))}
	}
}

// next starts a work request.
func (b *WRBatch) next(id uint64, op WROpcode, flags SendFlags) *SendWR {
	switch {
	case !b.open:
		b.fail("no batch: call StartWR first")
		return nil
	case len(b.wrs) == cap(b.wrs):
		if b.err == nil {
			b.err = &OpError{Verb: "WRBatch", Device: b.qp.pd.ctx.dev.Name,
				Err: fmt.Errorf("%w: the batch is full: it holds %d requests, the send queue's depth", unix.ENOMEM, cap(b.wrs))}
		}
		return nil
	}
	b.wrs = b.wrs[:len(b.wrs)+1]
	w := &b.wrs[len(b.wrs)-1]
	*w = SendWR{ID: id, Opcode: op, Flags: flags}
	return w
}

// cur is the current work request, or nil (and a builder error).
func (b *WRBatch) cur(what string) *SendWR {
	if !b.open || len(b.wrs) == 0 {
		b.fail("%s before an opcode", what)
		return nil
	}
	return &b.wrs[len(b.wrs)-1]
}

// Send adds a SEND (ibv_wr_send).
func (b *WRBatch) Send(id uint64, flags SendFlags) *WRBatch {
	b.next(id, WRSend, flags)
	return b
}

// SendWithImm adds a SEND with immediate data (ibv_wr_send_imm).
func (b *WRBatch) SendWithImm(id uint64, flags SendFlags, imm uint32) *WRBatch {
	if w := b.next(id, WRSendWithImm, flags); w != nil {
		w.Imm = imm
	}
	return b
}

// SendWithInv adds a SEND that invalidates rkey at the peer
// (ibv_wr_send_inv).
func (b *WRBatch) SendWithInv(id uint64, flags SendFlags, rkey uint32) *WRBatch {
	if w := b.next(id, WRSendWithInv, flags); w != nil {
		w.InvalidateRKey = rkey
	}
	return b
}

// RDMAWrite adds an RDMA WRITE to raddr under rkey (ibv_wr_rdma_write).
func (b *WRBatch) RDMAWrite(id uint64, flags SendFlags, rkey uint32, raddr uint64) *WRBatch {
	if w := b.next(id, WRRDMAWrite, flags); w != nil {
		w.RKey, w.RemoteAddr = rkey, raddr
	}
	return b
}

// RDMAWriteWithImm adds an RDMA WRITE with immediate data
// (ibv_wr_rdma_write_imm).
func (b *WRBatch) RDMAWriteWithImm(id uint64, flags SendFlags, rkey uint32, raddr uint64, imm uint32) *WRBatch {
	if w := b.next(id, WRRDMAWriteWithImm, flags); w != nil {
		w.RKey, w.RemoteAddr, w.Imm = rkey, raddr, imm
	}
	return b
}

// RDMARead adds an RDMA READ from raddr under rkey (ibv_wr_rdma_read).
func (b *WRBatch) RDMARead(id uint64, flags SendFlags, rkey uint32, raddr uint64) *WRBatch {
	if w := b.next(id, WRRDMARead, flags); w != nil {
		w.RKey, w.RemoteAddr = rkey, raddr
	}
	return b
}

// AtomicCmpSwp adds an atomic compare and swap of the 8 bytes at raddr
// (ibv_wr_atomic_cmp_swp); the old value lands in the SGE.
func (b *WRBatch) AtomicCmpSwp(id uint64, flags SendFlags, rkey uint32, raddr, compare, swap uint64) *WRBatch {
	if w := b.next(id, WRAtomicCmpAndSwp, flags); w != nil {
		w.RKey, w.RemoteAddr, w.CompareAdd, w.Swap = rkey, raddr, compare, swap
	}
	return b
}

// AtomicFetchAdd adds an atomic fetch and add to the 8 bytes at raddr
// (ibv_wr_atomic_fetch_add); the old value lands in the SGE.
func (b *WRBatch) AtomicFetchAdd(id uint64, flags SendFlags, rkey uint32, raddr, add uint64) *WRBatch {
	if w := b.next(id, WRAtomicFetchAndAdd, flags); w != nil {
		w.RKey, w.RemoteAddr, w.CompareAdd = rkey, raddr, add
	}
	return b
}

// LocalInv adds a LOCAL_INV of rkey (ibv_wr_local_inv).
func (b *WRBatch) LocalInv(id uint64, flags SendFlags, rkey uint32) *WRBatch {
	if w := b.next(id, WRLocalInv, flags); w != nil {
		w.InvalidateRKey = rkey
	}
	return b
}

// BindMW adds a memory window bind (ibv_wr_bind_mw).
func (b *WRBatch) BindMW(id uint64, flags SendFlags, bind MWBind) *WRBatch {
	if w := b.next(id, WRBindMW, flags); w != nil {
		w.Bind = bind
	}
	return b
}

// SetSGE gives the current request one scatter/gather entry
// (ibv_wr_set_sge).
func (b *WRBatch) SetSGE(lkey uint32, addr uint64, length uint32) *WRBatch {
	if w := b.cur("SetSGE"); w != nil {
		i := len(b.wrs) - 1
		s := b.sges[i*b.nsge : i*b.nsge+1 : i*b.nsge+1]
		s[0] = SGE{Addr: addr, Length: length, LKey: lkey}
		w.SGL = s
	}
	return b
}

// SetSGEList gives the current request the entries of sgl, copied
// (ibv_wr_set_sge_list); at most the QP's MaxSendSGE.
func (b *WRBatch) SetSGEList(sgl []SGE) *WRBatch {
	w := b.cur("SetSGEList")
	switch {
	case w == nil:
	case len(sgl) > b.nsge:
		b.fail("%d SGEs, the QP takes %d", len(sgl), b.nsge)
	default:
		i := len(b.wrs) - 1
		s := b.sges[i*b.nsge : i*b.nsge+len(sgl) : i*b.nsge+len(sgl)]
		copy(s, sgl)
		w.SGL = s
	}
	return b
}

// SetInlineData makes the current request carry length bytes at addr
// inline, copied into the work queue entry by Complete
// (ibv_wr_set_inline_data): the memory needs no registration and may be
// reused once Complete returns.
func (b *WRBatch) SetInlineData(addr uint64, length uint32) *WRBatch {
	if w := b.cur("SetInlineData"); w != nil {
		b.SetSGE(0, addr, length)
		w.Flags |= SendInline
	}
	return b
}

// SetUDAddr addresses the current request of a UD QP (ibv_wr_set_ud_addr).
func (b *WRBatch) SetUDAddr(ah *AH, remoteQPN, qkey uint32) *WRBatch {
	if w := b.cur("SetUDAddr"); w != nil {
		if ah == nil {
			b.fail("SetUDAddr without an address handle")
			return b
		}
		w.UD = UDDest{AH: ah, RemoteQPN: remoteQPN, QKey: qkey}
	}
	return b
}

// SetXRCSRQN names the XRC SRQ on the target that the current request of
// an XRC initiator QP lands in (ibv_wr_set_xrc_srqn).
func (b *WRBatch) SetXRCSRQN(srqn uint32) *WRBatch {
	if w := b.cur("SetXRCSRQN"); w != nil {
		w.RemoteSRQN = srqn
	}
	return b
}

// Complete posts the batch with one doorbell (ibv_wr_complete) and ends
// it. If a builder call failed, or the provider refuses a request (an
// opcode the QP's type does not take, too many SGEs, a full send queue),
// nothing is posted, the queue is as it was, and the error names the
// request.
func (b *WRBatch) Complete() error {
	if !b.open {
		if b.qp == nil {
			return &OpError{Verb: "WRBatch.Complete", Err: fmt.Errorf("%w: no batch: call StartWR first", unix.EINVAL)}
		}
		return &OpError{Verb: "WRBatch.Complete", Device: b.qp.pd.ctx.dev.Name, Err: fmt.Errorf("%w: no batch: call StartWR first", unix.EINVAL)}
	}
	b.open = false
	if b.err != nil {
		return b.err
	}
	if len(b.wrs) == 0 {
		return nil
	}
	_, err := b.qp.PostSend(b.wrs)
	return err
}

// Abort drops the batch: nothing is posted (ibv_wr_abort).
func (b *WRBatch) Abort() {
	b.open = false
	clear(b.wrs)
	b.wrs = b.wrs[:0]
}
