package rxe

import (
	"encoding/binary"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/doorbell"
	"github.com/goverbs/goverbs/internal/usermem"
	"github.com/goverbs/goverbs/provider"
)

// A plain WR is the send most programs post, alone: on an RC or UC QP, a
// SEND, SEND_WITH_IMM, SEND_WITH_INV, RDMA WRITE (with or without
// immediate) or RDMA READ of one SGE, its flags among SIGNALED, SOLICITED
// and FENCE, or INLINE with bytes the QP takes inline. PostSend of one
// such WR checks it against masks the QP computed at creation and writes
// its WQE without the list's loops and the other opcodes' cases
// (fillPlain); every other post takes the general path, and
// TestPlainMatchesGeneric checks that both write the same WQE.

// plainFlags are the flags a plain WR may carry but INLINE.
const plainFlags = provider.SendSignaled | provider.SendSolicited | provider.SendFence

// setPlain computes the send queue's plain masks: the opcodes a plain WR
// may have, without and with INLINE (none if a WR may not carry an SGE).
func (sq *sendQueue) setPlain() {
	if sq.caps.MaxSGE >= 1 {
		sq.plain = provider.PlainOps(sq.caps.Type, false)
		sq.plainInline = provider.PlainOps(sq.caps.Type, true)
	}
}

// isPlain reports whether wr is plain on sq: then provider.SendOK accepts
// it (so CheckSend does), and fillPlain writes what fillSend would.
func (sq *sendQueue) isPlain(wr *provider.SendWR) bool {
	if len(wr.SGL) != 1 {
		return false
	}
	bit := uint32(1) << wr.Opcode // 0 for an opcode past 31
	n := uint64(wr.SGL[0].Length)
	if wr.Flags&^plainFlags == 0 {
		return sq.plain&bit != 0 && n <= provider.MaxMessage
	}
	return wr.Flags&^plainFlags == provider.SendInline && sq.plainInline&bit != 0 && n <= uint64(sq.caps.MaxInline)
}

// postPlain is PostSend of one plain WR.
func (qp *QP) postPlain(wr *provider.SendWR) (int, error) {
	sq := &qp.sq
	sq.mu.Lock()
	q := sq.q
	if q == nil || q.mem == nil {
		sq.mu.Unlock()
		return 0, errClosedSend(wr.Opcode)
	}
	if st := qp.State(); st < provider.QPStateRTS {
		sq.mu.Unlock()
		return 0, errSendState(wr.Opcode, st)
	}
	prod := sq.prod
	if used := (prod - q.cons.Load()) & q.mask; used == q.mask { // acquire, as PostSend's
		sq.mu.Unlock()
		return 0, errSendFull(0, wr.Opcode, used, q.mask, 1)
	}
	n := qp.fillPlain(q, prod, wr)
	prod = (prod + 1) & q.mask
	sq.prod = prod
	doorbell.Publish32(q.prod, prod) // release: the WQE is complete before the kernel sees the index
	sq.mu.Unlock()
	out := uint64(n)
	if wr.Opcode == provider.WRRDMARead {
		out = 0 // the requester sends a request only
	}
	return qp.ring(out, 1)
}

// fillPlain is fillSend for a plain WR.
func (qp *QP) fillPlain(q *queue, i uint32, wr *provider.SendWR) uint32 {
	sq := &qp.sq
	w := q.sendWQE(i)
	*w = abi.RxeSendWqe{}
	w.Wr.WrId = wr.ID
	w.Wr.Opcode = uint32(wr.Opcode)
	w.Wr.SendFlags = uint32(wr.Flags)
	switch wr.Opcode {
	case provider.WRSendWithImm:
		binary.BigEndian.PutUint32(w.Wr.Ex[:], wr.Imm)
	case provider.WRSendWithInv:
		w.Wr.SetExInvalidateRkey(wr.InvalidateRKey)
	case provider.WRRDMAWriteWithImm:
		binary.BigEndian.PutUint32(w.Wr.Ex[:], wr.Imm)
		setRDMA(w, wr)
	case provider.WRRDMAWrite, provider.WRRDMARead:
		setRDMA(w, wr)
	}
	s := &wr.SGL[0]
	if wr.Flags&provider.SendInline != 0 {
		copy(wqeInline(w, int(s.Length)), usermem.Bytes(s.Addr, int(s.Length)))
	} else {
		wqeSGEs(w, 1)[0] = abi.RxeSge{Addr: s.Addr, Length: s.Length, Lkey: s.LKey}
		w.Dma.NumSge = 1
	}
	w.Wr.Reserved = 1 // num_sge before Linux 6.0
	w.Dma.Length = s.Length
	w.Dma.Resid = s.Length
	w.Ssn = sq.ssn
	sq.ssn++
	return s.Length
}
