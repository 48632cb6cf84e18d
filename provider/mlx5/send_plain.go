package mlx5

import "github.com/goverbs/goverbs/provider"

// A plain WR is the send most programs post: on an RC or UC QP, a SEND,
// SEND_WITH_IMM, SEND_WITH_INV, RDMA WRITE (with or without immediate) or
// RDMA READ of one non-empty SGE, not inline, its flags among SIGNALED,
// SOLICITED and FENCE. Its WQE is a control segment, the remote address
// segment if it has one, and one data segment: at most 48 bytes, one
// WQEBB, written here with fixed offsets. Everything else goes through
// planSend and buildSend, which write the same bytes for a plain WR (the
// tests compare the two); this path saves a post ~250 instructions of
// ~660 on the device model.

// plainWQE is what a plain WR's WQE takes from the WR's opcode.
type plainWQE struct {
	opcode uint8 // MLX5_OPCODE_*
	ds     uint8 // the WQE's size in 16-byte segments
	wc     provider.WCOpcode
}

// plainWQEs is indexed by provider.WROpcode; PlainOps bounds the index.
var plainWQEs = [...]plainWQE{
	provider.WRRDMAWrite:        {opRDMAWrite, 3, provider.WCRDMAWrite},
	provider.WRRDMAWriteWithImm: {opRDMAWriteIm, 3, provider.WCRDMAWrite},
	provider.WRSend:             {opSend, 2, provider.WCSend},
	provider.WRSendWithImm:      {opSendImm, 2, provider.WCSend},
	provider.WRRDMARead:         {opRDMARead, 3, provider.WCRDMARead},
	provider.WRSendWithInv:      {opSendInval, 2, provider.WCSend},
}

// plainOps is the set of opcodes (1<<op) that a QP of type t, with room
// for maxSGE SGEs and WQEs of maxBBs WQEBBs, posts as plain WRs.
func plainOps(t provider.QPType, maxSGE, maxBBs uint32) uint32 {
	if maxSGE == 0 || maxBBs == 0 {
		return 0
	}
	return provider.PlainOps(t)
}

// plainFlags are the flags a plain WR may carry.
const plainFlags = provider.SendSignaled | provider.SendSolicited | provider.SendFence

// isPlain reports whether wr is plain on a send queue of shape s: then it
// passes every check CheckSend and planSend make, and takes one WQEBB.
func isPlain(s *sqShape, wr *provider.SendWR) bool {
	return s.plain&(1<<wr.Opcode) != 0 && wr.Flags&^plainFlags == 0 && len(wr.SGL) == 1 &&
		wr.SGL[0].Length-1 < provider.MaxMessage // not 0 (2 GiB to the device), at most 2^31
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
	be.PutUint32(bb[ctrlOpmodIdxOpcode:], (head&0xffff)<<8|uint32(w.opcode))
	be.PutUint32(bb[ctrlQpnDs:], qpn<<8|uint32(w.ds))
	// The signature bytes and fm as one word: 0, 0, 0, fm.
	be.PutUint32(bb[ctrlSignature:], uint32(fm))
	be.PutUint32(bb[ctrlImm:], imm)

	data := bb[ctrlSize : ctrlSize+segSize]
	if w.ds == 3 {
		be.PutUint64(bb[ctrlSize+raddrRaddr:], wr.RemoteAddr)
		be.PutUint32(bb[ctrlSize+raddrRkey:], wr.RKey)
		be.PutUint32(bb[ctrlSize+raddrRkey+4:], 0)
		data = bb[ctrlSize+raddrSize : ctrlSize+raddrSize+segSize]
	}
	s := &wr.SGL[0]
	putDataSeg(data, s.Length, s.LKey, s.Addr)

	sq.wrid[idx] = wr.ID
	sq.next[idx] = head + 1
	sq.op[idx] = w.wc
	return bb
}
