package mlx5

import (
	"errors"

	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/provider/mlx5/internal/mlx5dv"
)

// Receive CQE bits (struct mlx5_cqe64, as rdma-core's cq.c reads them).
const (
	cqeRqpnMask     = 0xffffff
	cqeSLShift      = 24
	cqeGRHShift     = 28 // flags_rqpn: 2 bits, non-zero when a GRH arrived
	cqePathBitsMask = 0x7f
)

var errCQEOpcode = errors.New("CQE with an unknown opcode")

// syndromeStatus maps an error CQE's syndrome to a completion status.
func syndromeStatus(s uint8) provider.WCStatus {
	switch s {
	case mlx5dv.MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR:
		return provider.WCLocLenErr
	case mlx5dv.MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR:
		return provider.WCLocQPOpErr
	case mlx5dv.MLX5_CQE_SYNDROME_LOCAL_PROT_ERR:
		return provider.WCLocProtErr
	case mlx5dv.MLX5_CQE_SYNDROME_WR_FLUSH_ERR:
		return provider.WCWRFlushErr
	case mlx5dv.MLX5_CQE_SYNDROME_MW_BIND_ERR:
		return provider.WCMWBindErr
	case mlx5dv.MLX5_CQE_SYNDROME_BAD_RESP_ERR:
		return provider.WCBadRespErr
	case mlx5dv.MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR:
		return provider.WCLocAccessErr
	case mlx5dv.MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR:
		return provider.WCRemInvReqErr
	case mlx5dv.MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR:
		return provider.WCRemAccessErr
	case mlx5dv.MLX5_CQE_SYNDROME_REMOTE_OP_ERR:
		return provider.WCRemOpErr
	case mlx5dv.MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR:
		return provider.WCRetryExcErr
	case mlx5dv.MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR:
		return provider.WCRNRRetryExcErr
	case mlx5dv.MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR:
		return provider.WCRemAbortErr
	}
	return provider.WCGeneralErr
}

// reqOpcode maps the WQE opcode a requester CQE reports (the top byte of
// sop_drop_qpn) to a completion opcode and says whether byte_cnt is the
// completion's length.
func reqOpcode(op uint8) (provider.WCOpcode, uint32) {
	switch op {
	case opRDMAWrite, opRDMAWriteIm:
		return provider.WCRDMAWrite, 0
	case opRDMARead:
		return provider.WCRDMARead, ^uint32(0)
	case opAtomicCS:
		return provider.WCCompSwap, 8
	case opAtomicFA:
		return provider.WCFetchAdd, 8
	}
	return provider.WCSend, 0
}

// complete turns one CQE (64 bytes, already known to be new) into wc and
// retires the WQE it completes (an array, so that its fields are read
// without bounds checks). ok is false when the CQE names no live QP
// or SRQ (a leftover from a destroyed one): it is consumed and skipped.
func (c *context) complete(e *[cqe64Size]byte, wc *provider.WorkCompletion) (ok bool, err error) {
	opcode := e[cqeOpOwn] >> 4
	qpn := be.Uint32(e[cqeSopDropQpn:]) & 0xffffff
	key := qpn
	if c.cqeVersion == 1 {
		key = be.Uint32(e[cqeSrqnUidx:]) & 0xffffff
	}
	r := c.rsc.get(key)
	if r == nil {
		if r = c.xrcSRQ(e[:], opcode); r == nil {
			return false, nil
		}
	}
	*wc = provider.WorkCompletion{QPNum: qpn}
	counter := be.Uint16(e[cqeWqeCounter:])
	switch opcode {
	case cqeReq, cqeReqErr:
		q := r.qp
		if q == nil || q.sq.cnt == 0 {
			return false, nil
		}
		// Retire the WQE that starts at counter and every unsignaled one
		// before it; none is outstanding for a CQE left from before the
		// QP was reset. Written out: as a method it is past the inliner's
		// budget.
		sq := &q.sq
		t := sq.tail.Load()
		if (uint32(counter)-t)&0xffff >= sq.pub.Load()-t { // pub pairs with PostSend's publish
			return false, nil
		}
		sl := &sq.slots[uint32(counter)&(sq.cnt-1)]
		wc.ID, wc.Opcode = sl.wrid, sl.op
		storeCounter(&sq.tail, sl.next, sq.single) // after the reads: PostSend may reuse the slot from here on
		if opcode == cqeReqErr {
			wc.Status = syndromeStatus(e[errCqeSyndrome])
			wc.VendorErr = uint32(e[errCqeVendorErrSynd])
			return true, nil
		}
		if e[cqeSopDropQpn] == opUMR {
			return true, nil // BIND_MW or LOCAL_INV, as posted (rdma-core's wr_data)
		}
		var n uint32
		wc.Opcode, n = reqOpcode(e[cqeSopDropQpn])
		if n == ^uint32(0) {
			n = be.Uint32(e[cqeByteCnt:])
		}
		wc.ByteLen = n
		return true, nil
	case cqeRespWrImm, cqeRespSend, cqeRespSendIm, cqeRespSendIv, cqeRespErr:
		s := r.srq
		if s == nil && r.qp != nil {
			s = r.qp.srq
		}
		switch {
		case s != nil:
			wc.ID = s.retire(counter)
		case r.qp != nil && r.qp.rq.cnt > 0:
			var live bool
			if wc.ID, live = r.qp.rq.retire(); !live {
				return false, nil
			}
		default:
			return false, nil
		}
		if opcode == cqeRespErr {
			wc.Opcode = provider.WCRecv
			wc.Status = syndromeStatus(e[errCqeSyndrome])
			wc.VendorErr = uint32(e[errCqeVendorErrSynd])
			return true, nil
		}
		wc.ByteLen = be.Uint32(e[cqeByteCnt:])
		imm := be.Uint32(e[cqeImmInvalPkey:])
		switch opcode {
		case cqeRespWrImm:
			wc.Opcode, wc.Flags, wc.Imm = provider.WCRecvRDMAWithImm, provider.WCWithImm, imm
		case cqeRespSend:
			wc.Opcode = provider.WCRecv
		case cqeRespSendIm:
			wc.Opcode, wc.Flags, wc.Imm = provider.WCRecv, provider.WCWithImm, imm
		case cqeRespSendIv:
			wc.Opcode, wc.Flags, wc.Imm = provider.WCRecv, provider.WCWithInv, imm
		}
		fr := be.Uint32(e[cqeFlagsRqpn:])
		wc.SrcQP = fr & cqeRqpnMask
		wc.SL = uint8(fr>>cqeSLShift) & 0xf
		if (fr>>cqeGRHShift)&3 != 0 {
			wc.Flags |= provider.WCWithGRH
		}
		wc.SLID = be.Uint16(e[cqeSlid:])
		wc.DLIDPathBits = e[cqeMlPath] & cqePathBitsMask
		if opcode == cqeRespSend {
			wc.PKeyIndex = uint16(imm)
		}
		return true, nil
	}
	return true, errCQEOpcode
}
