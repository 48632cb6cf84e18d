package mlx5

import (
	"github.com/goverbs/goverbs/internal/usermem"
	"github.com/goverbs/goverbs/provider"
)

// A plain WR is the send most programs post: on an RC or UC QP, a SEND,
// SEND_WITH_IMM, SEND_WITH_INV, RDMA WRITE (with or without immediate) or
// RDMA READ of one non-empty SGE, its flags among SIGNALED, SOLICITED and
// FENCE, or INLINE with a few bytes that fit. Its WQE is a control
// segment, the remote address segment if it has one, and one data segment
// (or the inline bytes): one WQEBB, written here with fixed offsets.
// Everything else goes through planSend and buildSend, which write the
// same bytes for a plain WR (TestPlainMatchesGeneric compares the two).
// With PostSend's own ring, this takes a post on the device model from
// ~660 instructions to ~340.

// plainWQE is what a plain WR's WQE takes from the WR's opcode.
type plainWQE struct {
	opcode uint8 // MLX5_OPCODE_*
	raddr  bool  // a remote address segment follows the control segment
	wc     provider.WCOpcode
}

// plainWQEs is indexed by provider.WROpcode (PlainOps says which entries
// are used); 256 entries, so that a uint8 index needs no bounds check.
var plainWQEs = [256]plainWQE{
	provider.WRRDMAWrite:        {opRDMAWrite, true, provider.WCRDMAWrite},
	provider.WRRDMAWriteWithImm: {opRDMAWriteIm, true, provider.WCRDMAWrite},
	provider.WRSend:             {opSend, false, provider.WCSend},
	provider.WRSendWithImm:      {opSendImm, false, provider.WCSend},
	provider.WRRDMARead:         {opRDMARead, true, provider.WCRDMARead},
	provider.WRSendWithInv:      {opSendInval, false, provider.WCSend},
}

// plainOps is the set of opcodes (1<<op) that a QP of type t, with room
// for maxSGE SGEs and WQEs of maxBBs WQEBBs, posts as plain WRs (inline:
// with the INLINE flag).
func plainOps(t provider.QPType, maxSGE, maxBBs uint32, inline bool) uint32 {
	if maxSGE == 0 || maxBBs == 0 {
		return 0
	}
	return provider.PlainOps(t, inline)
}

// The inline bytes that fit in one WQEBB after the inline segment's
// header: behind the control segment, and behind it and a remote address.
const (
	inlineFitSend  = wqeBB - ctrlSize - inlHdrSize
	inlineFitWrite = wqeBB - ctrlSize - raddrSize - inlHdrSize
	writeOps       = 1<<provider.WRRDMAWrite | 1<<provider.WRRDMAWriteWithImm
)

// setPlain fills in s's plain fields from its type, capabilities and
// largest WQE.
func (s *sqShape) setPlain() {
	s.plain = plainOps(s.typ, s.caps.MaxSGE, s.maxBBs, false)
	s.plainInline = plainOps(s.typ, s.caps.MaxSGE, s.maxBBs, true)
	s.inlineSend = min(s.caps.MaxInline, inlineFitSend)
	s.inlineWrite = min(s.caps.MaxInline, inlineFitWrite)
}

// plainFlags are the flags a plain WR may carry but INLINE.
const plainFlags = provider.SendSignaled | provider.SendSolicited | provider.SendFence

// isPlain reports whether wr is plain on a send queue of shape s: then it
// passes every check CheckSend and planSend make, and takes one WQEBB.
func isPlain(s *sqShape, wr *provider.SendWR) bool {
	if len(wr.SGL) != 1 {
		return false
	}
	n := wr.SGL[0].Length - 1 // not 0: 2 GiB to the device, or no inline bytes
	bit := uint32(1) << wr.Opcode
	if wr.Flags&^plainFlags == 0 {
		return s.plain&bit != 0 && n < provider.MaxMessage
	}
	if wr.Flags&^plainFlags != provider.SendInline || s.plainInline&bit == 0 {
		return false
	}
	if bit&writeOps != 0 {
		return n < s.inlineWrite
	}
	return n < s.inlineSend
}

// writePlain writes plain wr's WQE at producer counter head and records
// what its completion needs; it returns the WQE. q.sqMu held, one WQEBB
// free.
func (sq *sendQueue) writePlain(head, qpn uint32, wr *provider.SendWR) *[wqeBB]byte {
	w := &plainWQEs[wr.Opcode]
	idx := head & (sq.cnt - 1)
	off := int(idx) * wqeBB
	bb := (*[wqeBB]byte)(sq.ring[off : off+wqeBB])

	fm := sq.fmCache
	sq.fmCache = 0
	if sq.sigAll || wr.Flags&provider.SendSignaled != 0 {
		fm |= ctrlCQUpdate
	}
	if wr.Flags&provider.SendSolicited != 0 {
		fm |= ctrlSolicited
	}
	if wr.Flags&provider.SendFence != 0 {
		fm = fm&^ctrlSmallFence | ctrlFence
	}
	var imm uint32
	switch w.opcode {
	case opSendImm, opRDMAWriteIm:
		imm = wr.Imm
	case opSendInval:
		imm = wr.InvalidateRKey
	}
	seg := ctrlSize // the data segment's offset
	if w.raddr {
		be.PutUint64(bb[ctrlSize+raddrRaddr:], wr.RemoteAddr)
		be.PutUint32(bb[ctrlSize+raddrRkey:], wr.RKey)
		be.PutUint32(bb[ctrlSize+raddrRkey+4:], 0)
		seg += raddrSize
	}
	s := &wr.SGL[0]
	end := seg + segSize
	if wr.Flags&provider.SendInline == 0 {
		putDataSeg(bb[seg:seg+segSize], s.Length, s.LKey, s.Addr)
	} else {
		// The padding up to the next 16-byte boundary is zero, as
		// writeInline leaves it: the segment it lies in is cleared first
		// (one 16-byte store; a clear of the padding alone was a call to
		// the runtime, ~25 instructions), then the header and the bytes
		// are written over it. isPlain bounds Length, so end <= wqeBB.
		end = (seg + inlHdrSize + int(s.Length) + segSize - 1) &^ (segSize - 1)
		*(*[segSize]byte)(bb[end-segSize : end]) = [segSize]byte{}
		be.PutUint32(bb[seg+inlByteCount:], s.Length|inlineSeg)
		copySmall(bb[seg+inlHdrSize:end], usermem.Bytes(s.Addr, int(s.Length)))
	}
	be.PutUint32(bb[ctrlOpmodIdxOpcode:], (head&0xffff)<<8|uint32(w.opcode))
	be.PutUint32(bb[ctrlQpnDs:], qpn<<8|uint32(end/segSize))
	// The signature bytes and fm as one word: 0, 0, 0, fm.
	be.PutUint32(bb[ctrlSignature:], uint32(fm))
	be.PutUint32(bb[ctrlImm:], imm)

	sl := &sq.slots[idx] // field by field: a composite literal goes through a temporary
	sl.wrid, sl.next, sl.op = wr.ID, head+1, w.wc
	return bb
}
