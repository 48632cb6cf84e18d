package model

import (
	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/internal/kernel"
	"golang.org/x/sys/unix"
)

// Memory windows, as ConnectX and the kernel's mlx5_ib keep them: ALLOC_MW
// creates a free KLM mkey in the PD (mlx5_ib_alloc_mw: free=1, umr_en,
// en_rinval for type 2, qpn 0xffffff), and the QP rebinds it with a UMR
// WQE (MLX5_OPCODE_UMR): a UMR control segment, an mkey context and, for a
// bind, one KLM naming the memory region. What the device checks is the
// IBTA's memory-window rules (C10-70 to C10-74, o10-37.2): the window and
// the MR in the QP's PD, the MR registered with MW_BIND, the window inside
// the MR, remote write or atomic only over a locally writable MR, a type 2
// window free before it is bound, tied to the binding QP, and invalidated
// (LOCAL_INV, SEND_WITH_INV) only by that QP; a type 1 window never by an
// invalidation. A failed bind or invalidation completes with the memory
// management syndrome (IBV_WC_MW_BIND_ERR) and moves the QP to ERR.

// UMR WQE layout (struct mlx5_wqe_umr_ctrl_seg, mlx5_wqe_mkey_context_seg,
// mlx5_wqe_umr_klm_seg) and values (<infiniband/mlx5dv.h>).
const (
	opUMR = 0x25

	wUMRFlags     = 0
	wUMROctowords = 4
	wUMRMask      = 8
	wUMRCtrlSize  = 48

	wMkeyFree     = 0
	wMkeyAccess   = 2
	wMkeyQpnMkey  = 4
	wMkeyStart    = 16
	wMkeyLen      = 24
	wMkeyCtxSize  = 64
	wKLMByteCount = 0
	wKLMMkey      = 4
	wKLMAddress   = 8

	umrInline     = 1 << 7
	umrCheckFree  = 1 << 5
	umrCheckQPN   = 1 << 3
	maskLen       = 1 << 0
	maskStartAddr = 1 << 6
	maskMkey      = 1 << 13
	maskQPN       = 1 << 14
	maskFree      = 1 << 29
	mkeyFreeBit   = 1 << 6
	mkeyAtomic    = 1 << 6
	mkeyRWrite    = 1 << 5
	mkeyRRead     = 1 << 4
	mkeyLWrite    = 1 << 3

	synMWBind = 0x06 // MLX5_CQE_SYNDROME_MW_BIND_ERR

	devCapMemWindow   = 1 << 17 // IB_DEVICE_MEM_WINDOW
	devCapMemWindow2B = 1 << 24 // IB_DEVICE_MEM_WINDOW_TYPE_2B
)

// mwKeyByte is the key byte of a new window's key: the key the kernel
// knows the window by (binds change the device's key byte, not the
// kernel's record).
const mwKeyByte = 0x17

// mmw is a memory window: an mkey the device rebinds.
type mmw struct {
	handle uint32
	key    uint32 // index<<8 | the current key byte
	pd     *mpd
	type2  bool
	free   bool   // not bound: its key opens nothing
	qpn    uint32 // type 2: the QP it is bound to
	start  uint64 // the window's first address as peers name it (0 if zero-based)
	length uint64
	access uint32 // IB access bits
	mr     *mmr   // the MR it maps, at I/O address mrAddr
	mrAddr uint64
}

// umr is a decoded UMR WQE.
type umr struct {
	flags     uint8
	octowords uint16
	mask      uint64
	free      bool
	access    uint8
	qpnMkey   uint32
	start     uint64
	length    uint64
	klmLen    uint32
	klmMkey   uint32
	klmAddr   uint64
}

// decodeUMR parses the segments after the control segment of the UMR WQE
// b of size bytes; false for a WQE too short for what it says it holds.
func decodeUMR(b []byte, size int) (umr, bool) {
	var u umr
	if size < wSeg+wUMRCtrlSize+wMkeyCtxSize {
		return u, false
	}
	c := b[wSeg:]
	u.flags = c[wUMRFlags]
	u.octowords = be.Uint16(c[wUMROctowords:])
	u.mask = be.Uint64(c[wUMRMask:])
	m := b[wSeg+wUMRCtrlSize:]
	u.free = m[wMkeyFree]&mkeyFreeBit != 0
	u.access = m[wMkeyAccess]
	u.qpnMkey = be.Uint32(m[wMkeyQpnMkey:])
	u.start = be.Uint64(m[wMkeyStart:])
	u.length = be.Uint64(m[wMkeyLen:])
	if u.octowords > 0 {
		at := wSeg + wUMRCtrlSize + wMkeyCtxSize
		if size < at+int(u.octowords)*wSeg {
			return u, false
		}
		k := b[at:]
		u.klmLen, u.klmMkey, u.klmAddr = be.Uint32(k[wKLMByteCount:]), be.Uint32(k[wKLMMkey:]), be.Uint64(k[wKLMAddress:])
	}
	return u, true
}

// executeUMR carries out a bind or invalidation of the window whose key
// the control segment's immediate names; it returns a syndrome, 0 on
// success.
func (d *Device) executeUMR(q *mqp, w *wqe) uint8 {
	u := w.umr
	if u.octowords > 0 && u.flags&umrInline == 0 {
		d.violation("QP %d: UMR WQE at %d has %d translation octowords but not the inline flag", q.qpn, w.pos, u.octowords)
		return synLocalQPOp
	}
	if u.mask&maskMkey == 0 || u.mask&maskFree == 0 {
		d.violation("QP %d: UMR WQE at %d does not set the key and the free bit (mkey_mask %#x)", q.qpn, w.pos, u.mask)
		return synLocalQPOp
	}
	// The device takes the mkey's index from the immediate; the key byte
	// there is not checked (rdma-core's LOCAL_INV leaves the key byte 0,
	// and the next bind names the window by its old key).
	mw := d.mws[w.imm>>8]
	if mw == nil || mw.pd != q.pd {
		return synMWBind
	}
	qpn := u.qpnMkey >> 8
	if u.mask&maskLen == 0 { // unbind or invalidate
		if !u.free {
			d.violation("QP %d: UMR WQE at %d changes no length and does not free the window", q.qpn, w.pos)
			return synLocalQPOp
		}
		if u.flags&umrCheckQPN != 0 {
			// An invalidation: type 2 only, by the QP it is bound to.
			if !mw.type2 || mw.free || mw.qpn != q.qpn {
				return synMWBind
			}
		} else if mw.type2 {
			return synMWBind // a type 2 window is unbound by invalidation only
		}
		mw.free, mw.mr = true, nil
		mw.key = mw.key&^0xff | u.qpnMkey&0xff
		return 0
	}
	// A bind: a type 1 window with QPN 0xffffff, a type 2 one with the
	// binding QP and the free check.
	if mw.type2 {
		if qpn != q.qpn || u.flags&umrCheckFree == 0 || u.mask&maskQPN == 0 || !mw.free {
			return synMWBind
		}
	} else if qpn != 0xffffff {
		return synMWBind
	}
	if u.free || u.octowords == 0 || uint64(u.klmLen) != u.length || u.length == 0 {
		d.violation("QP %d: bind WQE at %d: length %d, KLM %d bytes in %d octowords, free %v", q.qpn, w.pos, u.length, u.klmLen, u.octowords, u.free)
		return synLocalQPOp
	}
	var access uint32
	if u.access&mkeyLWrite != 0 {
		access |= accLocalWrite
	}
	if u.access&mkeyRWrite != 0 {
		access |= accRemoteWrite
	}
	if u.access&mkeyRRead != 0 {
		access |= accRemoteRead
	}
	if u.access&mkeyAtomic != 0 {
		access |= accRemoteAtomic
	}
	mr := d.mrs[u.klmMkey]
	if mr == nil || mr.pd != q.pd || mr.access&abi.IB_UVERBS_ACCESS_MW_BIND == 0 ||
		u.klmAddr < mr.iova || u.klmAddr-mr.iova+u.length > mr.length ||
		access&(accRemoteWrite|accRemoteAtomic) != 0 && mr.access&accLocalWrite == 0 {
		return synMWBind
	}
	mw.free, mw.mr, mw.mrAddr = false, mr, u.klmAddr
	mw.start, mw.length, mw.access = u.start, u.length, access
	mw.key = mw.key&^0xff | u.qpnMkey&0xff
	if mw.type2 {
		mw.qpn = q.qpn
	}
	return 0
}

// remoteMW resolves n bytes at addr through the window with rkey on the
// responder QP: a bound window of its PD (a type 2 one bound to this QP)
// granting access, the range inside the window and its MR.
func (d *Device) remoteMW(q *mqp, rkey uint32, addr uint64, n uint32, access uint32) ([]byte, bool) {
	mw := d.mws[rkey>>8]
	if mw == nil || mw.key != rkey || mw.free || mw.pd != q.pd || mw.type2 && mw.qpn != q.qpn ||
		mw.access&access == 0 || q.access&access == 0 {
		return nil, false
	}
	if addr < mw.start || addr-mw.start+uint64(n) > mw.length {
		return nil, false
	}
	m := mw.mr
	if d.mrs[m.key] != m { // deregistered since the bind
		return nil, false
	}
	at := mw.mrAddr + (addr - mw.start)
	if at < m.iova || at-m.iova+uint64(n) > m.length {
		return nil, false
	}
	if n == 0 {
		return nil, true
	}
	if m.odp && !d.odpAccess(m, m.start+(at-m.iova), n, access != accRemoteRead) {
		return nil, false
	}
	return kernel.UserMemory(m.start+(at-m.iova), int(n)), true
}

// remoteInvalidate carries out a SEND_WITH_INV's invalidation on the
// responder: a bound type 2 window of its PD, bound to it (en_rinval is set
// for type 2 windows only; user MRs cannot be invalidated remotely).
func (d *Device) remoteInvalidate(p *mqp, rkey uint32) bool {
	mw := d.mws[rkey>>8]
	if mw == nil || mw.key != rkey || !mw.type2 || mw.free || mw.pd != p.pd || mw.qpn != p.qpn {
		return false
	}
	mw.free, mw.mr = true, nil
	return true
}

// cmdAllocMW is ALLOC_MW (mlx5_ib_alloc_mw): the driver data is struct
// mlx5_ib_alloc_mw, whose comp_mask and reserved fields must be zero, and
// nothing after it but zeroes.
func (u *ufile) cmdAllocMW(in, out, din, dout []byte) error {
	var req abi.IbUverbsAllocMw
	copy(abi.Bytes(&req), in)
	if u.d.o.NoMemWindows {
		return unix.EOPNOTSUPP // no imaicl capability: the driver has no alloc_mw
	}
	p, ok := u.ctx.objs[req.PdHandle].(*mpd)
	if !ok || req.MwType != 1 && req.MwType != 2 {
		return unix.EINVAL
	}
	for i, b := range din {
		if b != 0 && (i < 4 || i >= 5) { // only num_klms (byte 4) may be set
			return unix.EOPNOTSUPP
		}
	}
	d := u.d
	idx := d.nextKey
	d.nextKey++
	m := &mmw{key: idx<<8 | mwKeyByte, pd: p, type2: req.MwType == 2, free: true, qpn: 0xffffff}
	m.handle = u.ctx.add(m)
	d.mws[idx] = m
	p.users++
	r := abi.IbUverbsAllocMwResp{MwHandle: m.handle, Rkey: m.key}
	copy(out, abi.Bytes(&r))
	if len(dout) >= 8 {
		clear(dout)
		ne.PutUint32(dout[4:], 8) // response_length
	}
	return nil
}

func (u *ufile) deallocMW(h uint32) error {
	m, ok := u.ctx.objs[h].(*mmw)
	if !ok {
		return unix.EINVAL
	}
	delete(u.ctx.objs, h)
	delete(u.d.mws, m.key>>8)
	m.pd.users--
	return nil
}

func (u *ufile) cmdDeallocMW(in, out, din, dout []byte) error {
	var req abi.IbUverbsDeallocMw
	copy(abi.Bytes(&req), in)
	return u.deallocMW(req.MwHandle)
}
