package mlx5

import (
	"sync"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// Memory windows. ConnectX binds and invalidates a window with a UMR WQE
// (MLX5_OPCODE_UMR) that rewrites the window's memory key: a control
// segment, a UMR control segment (which fields change), the new mkey
// context (key byte, QP, access, range; or "free"), and for a bind one KLM
// pointing at the memory region. The layout and field values are those of
// rdma-core's providers/mlx5 (set_bind_wr and its helpers), read for the
// facts; the code is goverbs' own.

// umrWQEBytes is the largest UMR WQE: ctrl, UMR ctrl, mkey context and the
// 64-byte KLM block. rdma-core sizes every RC and UC send WQE for it
// (_sq_overhead's mw_size), so a bind fits whatever the QP's SGE count.
const umrWQEBytes = ctrlSize + umrCtrlSize + mkeyCtxSize + klmBlockSize

// maxBindLength is the longest window one KLM maps (its byte count is 31
// bits; rdma-core refuses longer binds with EOPNOTSUPP).
const maxBindLength = 1 << 31

// mwTable is a context's memory windows by key index (rkey>>8): whether
// each is of type 2. uverbs reports allocations and deallocations
// (provider.MWTracker); PostSend reads it to encode a bind, which names its
// window by rkey only.
type mwTable struct {
	mu    sync.RWMutex
	type2 map[uint32]bool
}

// isType1 reports whether rkey names a type 1 window of the context. A key
// the context did not allocate as a window is encoded as type 2, as
// libibverbs' ibv_wr_bind_mw always does; the device judges it.
func (t *mwTable) isType1(rkey uint32) bool {
	t.mu.RLock()
	t2, ok := t.type2[rkey>>8]
	t.mu.RUnlock()
	return ok && !t2
}

var (
	_ provider.MWTracker   = (*context)(nil)
	_ provider.NullMRKeyer = (*context)(nil)
)

// NullMRKey is the device's dump-fill mkey, which the kernel reports in
// the ucontext response (MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_DUMP_FILL_MKEY)
// when the device has one and the response is long enough; rdma-core's
// mlx5_alloc_null_mr hands it out as the null MR's lkey.
func (c *context) NullMRKey() (uint32, error) {
	if c.resp.CompMask&abi.MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_DUMP_FILL_MKEY == 0 {
		return 0, notSupported("the kernel reported no dump-fill mkey (no null MR on this device)")
	}
	return c.resp.DumpFillMkey, nil
}

// MWAllocated records a window the kernel allocated on the context.
func (c *context) MWAllocated(rkey uint32, type2 bool) {
	c.mws.mu.Lock()
	if c.mws.type2 == nil {
		c.mws.type2 = map[uint32]bool{}
	}
	c.mws.type2[rkey>>8] = type2
	c.mws.mu.Unlock()
}

// MWFreed forgets a window the kernel deallocated.
func (c *context) MWFreed(rkey uint32) {
	c.mws.mu.Lock()
	delete(c.mws.type2, rkey>>8)
	c.mws.mu.Unlock()
}

// planUMR plans the UMR WQE of a BIND_MW or LOCAL_INV request (which
// provider.CheckSend accepted: no SGL, a window key with the same index).
func planUMR(s *sqShape, wr *provider.SendWR, p *sendPlan) error {
	p.opcode = opUMR
	size := uint32(ctrlSize + umrCtrlSize + mkeyCtxSize)
	if wr.Opcode == provider.WRBindMW {
		p.type1 = s.mws != nil && s.mws.isType1(wr.Bind.MWRKey)
		if wr.Bind.Length > maxBindLength {
			return notSupported("a window of %d bytes: one KLM maps at most 2^31", wr.Bind.Length)
		}
		if wr.Bind.Length > 0 {
			size += klmBlockSize
		}
	}
	p.ds = size / segSize
	p.bbs = (size + wqeBB - 1) / wqeBB
	if p.bbs > s.maxBBs {
		return invalid("the WQE needs %d bytes, the queue was sized for %d", size, s.maxBBs*wqeBB)
	}
	return nil
}

// buildUMR writes the UMR segments of a bind (type 1 or 2) or a local
// invalidation after the control segment, through w.
func buildUMR(w *wqeWriter, qpn uint32, wr *provider.SendWR, p *sendPlan) {
	var b provider.MWBind
	type1 := false
	if wr.Opcode == provider.WRBindMW {
		b, type1 = wr.Bind, p.type1
	} // LOCAL_INV: an unbind of a type 2 window to key byte 0, checking its QP
	bind := b.Length > 0

	// UMR control segment: 48 bytes, three 16-byte pieces.
	u := w.seg()
	flags := uint8(umrFlagTransOff | umrFlagInline)
	mask := uint64(umrMaskFree | umrMaskMkey)
	if !type1 {
		mask |= umrMaskQPN
	}
	octo := uint16(0)
	if bind {
		octo = 4 // get_klm_octo(1): one KLM rounded up to an octoword
		if !type1 {
			flags |= umrFlagCheckFree
		}
		mask |= umrMaskLen | umrMaskStartAddr | umrMaskLocalWrite | umrMaskRemoteRead | umrMaskRemoteWrite | umrMaskAtomic
	} else if !type1 {
		flags |= umrFlagCheckQPN
	}
	clear(u)
	u[umrFlags] = flags
	be.PutUint16(u[umrKlmOctowords:], octo)
	be.PutUint64(u[umrMkeyMask:], mask)
	clear(w.seg())
	clear(w.seg())

	// Mkey context: 64 bytes.
	m0, m1, m2, m3 := w.seg(), w.seg(), w.seg(), w.seg()
	clear(m0)
	clear(m1)
	clear(m2)
	clear(m3)
	qpnMkey := b.NewRKey & 0xff
	if type1 || !bind {
		qpnMkey |= 0xffffff00
	} else {
		qpnMkey |= qpn << 8
	}
	be.PutUint32(m0[mkeyQpnMkey:], qpnMkey)
	if !bind {
		m0[mkeyFree] = mkeyCtxFree
		return
	}
	var acc uint8
	if b.Access&abi.IB_UVERBS_ACCESS_LOCAL_WRITE != 0 {
		acc |= mkeyAccLocalWrite
	}
	if b.Access&abi.IB_UVERBS_ACCESS_REMOTE_WRITE != 0 {
		acc |= mkeyAccRemoteWrite
	}
	if b.Access&abi.IB_UVERBS_ACCESS_REMOTE_READ != 0 {
		acc |= mkeyAccRemoteRead
	}
	if b.Access&abi.IB_UVERBS_ACCESS_REMOTE_ATOMIC != 0 {
		acc |= mkeyAccAtomic
	}
	m0[mkeyAccessFlags] = acc
	if b.Access&abi.IB_UVERBS_ACCESS_ZERO_BASED == 0 {
		be.PutUint64(m1[mkeyStartAddr-segSize:], b.Addr)
	}
	be.PutUint64(m1[mkeyLen-segSize:], b.Length)

	// The KLM, in a 64-byte block.
	k := w.seg()
	be.PutUint32(k[klmByteCount:], uint32(b.Length))
	be.PutUint32(k[klmMkey:], b.MRLKey)
	be.PutUint64(k[klmAddress:], b.Addr)
	clear(w.seg())
	clear(w.seg())
	clear(w.seg())
}
