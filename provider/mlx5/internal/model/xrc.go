package model

import (
	"github.com/goverbs/goverbs/abi"
	"golang.org/x/sys/unix"
)

// XRC as the kernel (uverbs create_qp, __uverbs_create_xsrq,
// ib_uverbs_open_qp, modify_qp_mask, the IBTA state table) and the mlx5
// hardware have it:
//
//   - CREATE_XSRQ of type XRC takes a PD, an XRC domain and a CQ, and the
//     same driver data as a basic SRQ; its receives complete on that CQ,
//     with the SRQ's user index (CQE version 1) or number (version 0) in
//     srqn_uidx and the target QP's number as the CQE's QP number;
//   - CREATE_QP of XRC_TGT names the domain where the PD goes, has no
//     CQs, rings or driver data (the kernel makes the QP itself);
//     XRC_INI has a PD, a send CQ and a send ring only;
//   - OPEN_QP gives another context of the domain a handle to a target QP
//     by number; the QP lives until its last handle is destroyed;
//   - each initiator WQE carries an XRC segment (the remote SRQ number)
//     after its control segment; the target hands the message to that SRQ
//     if it is an XRC SRQ of the target's domain, and checks remote
//     access against the SRQ's PD;
//   - MODIFY_QP drops the attributes a side does not use (the initiator's
//     MAX_DEST_RD_ATOMIC and MIN_RNR_TIMER, the target's MAX_QP_RD_ATOMIC,
//     RETRY_CNT and RNR_RETRY) before checking the transition.

// QP types of XRC (enum ib_uverbs_qp_type).
const (
	qptXRCIni = 9
	qptXRCTgt = 10
)

// mopen is a handle to a target QP opened by OPEN_QP.
type mopen struct {
	handle uint32
	q      *mqp
}

// qpOf resolves a QP handle: one the context created, or one it opened.
func (c *ucontext) qpOf(h uint32) (*mqp, bool) {
	switch o := c.objs[h].(type) {
	case *mqp:
		return o, true
	case *mopen:
		return o.q, true
	}
	return nil, false
}

// createTgtQP is CREATE_QP of an XRC target: a.pd is the domain's handle.
// The kernel creates it without the caller's driver data (ib_create_qp_user
// passes no udata for IB_QPT_XRC_TGT): no ECE options reach the firmware
// (create_xrc_tgt_qp sets no create_qp_in.ece) and no driver response is
// written, so its ECE starts at 0 on any device; MODIFY_QP's options reach
// it like any QP's (ece.go).
func (u *ufile) createTgtQP(a qpCreate) (*mqp, error) {
	d, ctx := u.d, u.ctx
	x, ok := ctx.objs[a.pd].(*mxrcd)
	if !ok {
		return nil, unix.EINVAL
	}
	q := &mqp{ctx: ctx, typ: qptXRCTgt, userHandle: a.userHandle, xrcd: x.x, refs: 1}
	q.qpn = d.nextQPN
	d.nextQPN++
	q.handle = ctx.add(q)
	d.qps[q.qpn] = q
	x.x.refs++ // the QP holds its domain
	return q, nil
}

func (u *ufile) cmdOpenQP(in, out, din, dout []byte) error {
	var req abi.IbUverbsOpenQp
	copy(abi.Bytes(&req), in)
	x, ok := u.ctx.objs[req.PdHandle].(*mxrcd)
	if !ok {
		return unix.EINVAL
	}
	q := u.d.qps[req.Qpn]
	if q == nil || req.QpType != qptXRCTgt || q.typ != qptXRCTgt || q.xrcd != x.x {
		return unix.EINVAL // ib_open_qp: no such target QP in the domain
	}
	o := &mopen{q: q}
	o.handle = u.ctx.add(o)
	q.refs++
	r := abi.IbUverbsCreateQpResp{QpHandle: o.handle, Qpn: q.qpn}
	copy(out, abi.Bytes(&r))
	return nil
}

// dropTgt releases one handle of a target QP; the last frees it.
func (d *Device) dropTgt(q *mqp) {
	q.refs--
	if q.refs == 0 {
		delete(d.qps, q.qpn)
		d.dropXRCD(q.xrcd)
	}
}

func (u *ufile) cmdCreateXSRQ(in, out, din, dout []byte) error {
	var req abi.IbUverbsCreateXsrq
	copy(abi.Bytes(&req), in)
	switch req.SrqType {
	case abi.IB_UVERBS_SRQT_BASIC:
		b := abi.IbUverbsCreateSrq{Response: req.Response, UserHandle: req.UserHandle, PdHandle: req.PdHandle,
			MaxWr: req.MaxWr, MaxSge: req.MaxSge, SrqLimit: req.SrqLimit}
		return u.cmdCreateSRQ(abi.Bytes(&b), out, din, dout)
	case abi.IB_UVERBS_SRQT_XRC:
	default:
		return unix.EINVAL
	}
	x, ok1 := u.ctx.objs[req.XrcdHandle].(*mxrcd)
	c, ok2 := u.ctx.objs[req.CqHandle].(*mcq)
	if !ok1 || !ok2 {
		return unix.EINVAL
	}
	b := abi.IbUverbsCreateSrq{Response: req.Response, UserHandle: req.UserHandle, PdHandle: req.PdHandle,
		MaxWr: req.MaxWr, MaxSge: req.MaxSge, SrqLimit: req.SrqLimit}
	if err := u.cmdCreateSRQ(abi.Bytes(&b), out, din, dout); err != nil {
		return err
	}
	var r abi.IbUverbsCreateSrqResp
	copy(abi.Bytes(&r), out)
	s := u.ctx.objs[r.SrqHandle].(*msrq)
	s.xrcd, s.cq = x.x, c
	x.x.refs++
	c.users++
	return nil
}

// xrcMask is modify_qp_mask: the attributes an XRC side ignores.
func xrcMask(typ uint8, mask uint32) uint32 {
	switch typ {
	case qptXRCIni:
		return mask &^ (maskMaxDestRdAtom | maskMinRNRTimer)
	case qptXRCTgt:
		return mask &^ (maskMaxRdAtomic | maskRetryCnt | maskRNRRetry)
	}
	return mask
}

// xrcRequired is the state table's required attributes of the XRC types.
func xrcRequired(typ, cur, next uint8) (need uint32, ok bool) {
	switch {
	case cur == qpsInit && next == qpsRTR:
		if typ == qptXRCTgt {
			return maskAV | maskPathMTU | maskDestQPN | maskRQPSN | maskMaxDestRdAtom | maskMinRNRTimer, true
		}
		return maskAV | maskPathMTU | maskDestQPN | maskRQPSN, true
	case cur == qpsRTR && next == qpsRTS:
		if typ == qptXRCTgt {
			return maskTimeout | maskSQPSN, true
		}
		return maskSQPSN | maskTimeout | maskRetryCnt | maskRNRRetry | maskMaxRdAtomic, true
	}
	return required(qptRC, cur, next)
}

// peerType is the type of QP a connected QP of type t talks to.
func peerType(t uint8) uint8 {
	switch t {
	case qptXRCIni:
		return qptXRCTgt
	case qptXRCTgt:
		return qptXRCIni
	}
	return t
}

// xrcResponder is the responder an initiator's WQE reaches through target
// QP p: p as seen through the XRC SRQ the WQE names (its PD for memory
// access, its receive WQEs, its CQ and user index). Nil when the SRQ is
// not an XRC SRQ of p's domain.
func xrcResponder(p *mqp, srqn uint32) *mqp {
	s := p.dev().srqs[srqn]
	if s == nil || s.xrcd == nil || s.xrcd != p.xrcd {
		return nil
	}
	v := *p
	v.pd, v.srq, v.rcq, v.uidx, v.ctx = s.pd, s, s.cq, s.uidx, s.ctx
	return &v
}

// ioctlCreateSRQ is the kernel's UVERBS_METHOD_SRQ_CREATE handler
// (uverbs_std_types_srq.c, Linux 5.10 on): the PD, the type, the user
// handle and the three sizes are mandatory; an XRC SRQ takes its CQ and
// domain from attributes (absent: ENOENT); the response carries the sizes
// and, for XRC, the SRQ number. Tag matching is not modelled (EOPNOTSUPP,
// as a driver without it answers).
func (u *ufile) ioctlCreateSRQ(c *call) error {
	pd, ok1 := c.u64(abi.UVERBS_ATTR_CREATE_SRQ_PD_HANDLE)
	typ, ok2 := c.u64(abi.UVERBS_ATTR_CREATE_SRQ_TYPE)
	uh, ok3 := c.u64(abi.UVERBS_ATTR_CREATE_SRQ_USER_HANDLE)
	var sizes [3]uint32
	for i, id := range []uint16{abi.UVERBS_ATTR_CREATE_SRQ_MAX_WR, abi.UVERBS_ATTR_CREATE_SRQ_MAX_SGE, abi.UVERBS_ATTR_CREATE_SRQ_LIMIT} {
		b, ok := c.in(id)
		if !ok || len(b) != 4 { // UVERBS_ATTR_TYPE(u32)
			return unix.EINVAL
		}
		sizes[i] = ne.Uint32(b)
	}
	if !ok1 || !ok2 || !ok3 || c.find(abi.UVERBS_ATTR_CREATE_SRQ_HANDLE) == nil ||
		c.find(abi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR) == nil || c.find(abi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE) == nil {
		return unix.EINVAL // a mandatory attribute is missing
	}
	req := abi.IbUverbsCreateXsrq{UserHandle: uh, SrqType: uint32(typ), PdHandle: uint32(pd), MaxWr: sizes[0], MaxSge: sizes[1], SrqLimit: sizes[2]}
	switch typ {
	case abi.IB_UVERBS_SRQT_BASIC:
	case abi.IB_UVERBS_SRQT_XRC:
		if c.find(abi.UVERBS_ATTR_CREATE_SRQ_CQ_HANDLE) == nil || c.find(abi.UVERBS_ATTR_CREATE_SRQ_XRCD_HANDLE) == nil {
			return unix.ENOENT
		}
		req.CqHandle = handleOf(c, abi.UVERBS_ATTR_CREATE_SRQ_CQ_HANDLE)
		req.XrcdHandle = handleOf(c, abi.UVERBS_ATTR_CREATE_SRQ_XRCD_HANDLE)
	case abi.IB_UVERBS_SRQT_TM:
		return unix.EOPNOTSUPP
	default:
		return unix.EINVAL
	}
	din, _ := c.in(attrUHWIn)
	dout, _ := c.out(attrUHWOut)
	var r abi.IbUverbsCreateSrqResp
	if err := u.cmdCreateXSRQ(abi.Bytes(&req), abi.Bytes(&r), din, dout); err != nil {
		return err
	}
	c.setData(abi.UVERBS_ATTR_CREATE_SRQ_HANDLE, uint64(r.SrqHandle))
	for _, o := range []struct {
		id uint16
		v  uint32
	}{{abi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR, r.MaxWr}, {abi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE, r.MaxSge}} {
		out, _ := c.out(o.id)
		ne.PutUint32(out, o.v)
	}
	if typ == abi.IB_UVERBS_SRQT_XRC {
		if out, ok := c.out(abi.UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM); ok {
			ne.PutUint32(out, r.Srqn)
		}
	}
	return nil
}
