package model

import (
	"github.com/goverbs/goverbs/abi"
	"golang.org/x/sys/unix"
)

// qpCreate is the core part of a CREATE_QP, from either transport.
type qpCreate struct {
	userHandle   uint64
	pd, scq, rcq uint32
	srq          uint32
	hasSRQ       bool
	cap          abi.IbUverbsQpCap
	typ          uint8
	sigAll       bool
}

// createQP is the mlx5 driver's QP creation from mlx5_ib_create_qp: the
// rings (receive first, then send) and the doorbell record are the
// provider's memory.
func (u *ufile) createQP(a qpCreate, din, dout []byte) (*mqp, error) {
	d, ctx := u.d, u.ctx
	if a.typ == qptXRCTgt {
		return u.createTgtQP(a) // xrc.go
	}
	pd, ok1 := ctx.objs[a.pd].(*mpd)
	scq, ok2 := ctx.objs[a.scq].(*mcq)
	rcq, ok3 := ctx.objs[a.rcq].(*mcq)
	if a.typ == qptXRCIni {
		// No receive side: the kernel ignores the receive CQ and SRQ.
		rcq, ok3, a.hasSRQ = nil, true, false
		a.cap.MaxRecvWr, a.cap.MaxRecvSge = 0, 0
	}
	if !ok1 || !ok2 || !ok3 {
		return nil, unix.EINVAL
	}
	var srq *msrq
	if a.hasSRQ {
		var ok bool
		if srq, ok = ctx.objs[a.srq].(*msrq); !ok {
			return nil, unix.EINVAL
		}
	}
	if a.typ != qptRC && a.typ != qptUC && a.typ != qptUD && a.typ != qptXRCIni {
		return nil, unix.EOPNOTSUPP
	}
	if a.cap.MaxSendWr > maxQPWR || a.cap.MaxRecvWr > maxQPWR || a.cap.MaxSendSge > maxSGE || a.cap.MaxRecvSge > maxSGE {
		return nil, unix.EINVAL
	}
	var req abi.Mlx5IbCreateQp
	if len(din) < 40 {
		return nil, unix.EINVAL
	}
	copy(abi.Bytes(&req), din)
	sq, rq, shift := req.SqWqeCount, req.RqWqeCount, req.RqWqeShift
	if sq != 0 && (!isPow2(sq) || sq > maxQPWR) || rq != 0 && (!isPow2(rq) || rq > maxQPWR || shift < 4 || 1<<shift > maxRQDesc) {
		return nil, unix.EINVAL
	}
	if (srq != nil || a.typ == qptXRCIni) && rq != 0 || req.BufAddr == 0 || req.DbAddr == 0 || req.DbAddr%8 != 0 {
		return nil, unix.EINVAL
	}
	const knownFlags = abi.MLX5_QP_FLAG_UAR_PAGE_INDEX | abi.MLX5_QP_FLAG_BFREG_INDEX | abi.MLX5_QP_FLAG_SCATTER_CQE
	if req.Flags&^knownFlags != 0 {
		return nil, unix.EINVAL
	}
	if ctx.cqeVersion == 1 && req.Uidx >= 0xffffff {
		return nil, unix.EINVAL
	}
	q := &mqp{ctx: ctx, typ: a.typ, pd: pd, scq: scq, rcq: rcq, srq: srq, userHandle: a.userHandle, sigAll: a.sigAll,
		rqCnt: rq, rqShift: shift, sqCnt: sq, uidx: req.Uidx}
	q.caps = [5]uint32{a.cap.MaxSendWr, a.cap.MaxRecvWr, a.cap.MaxSendSge, a.cap.MaxRecvSge, a.cap.MaxInlineData}
	var resp abi.Mlx5IbCreateQpResp
	q.ece = d.eceAnswer(req.EceOptions)
	resp.EceOptions = q.ece
	switch {
	case req.Flags&abi.MLX5_QP_FLAG_UAR_PAGE_INDEX != 0:
		p := ctx.dynPages[req.BfregIndex]
		if p == nil {
			return nil, unix.EINVAL
		}
		for k := 0; k < bfPerUAR; k++ {
			q.bfregs = append(q.bfregs, bfreg{page: p, off: uarBFReg + k*bfRegSize})
		}
		resp.BfregIndex = req.BfregIndex
	case ctx.dyn:
		return nil, unix.EINVAL // dynamic UARs: the QP must name one
	default:
		idx := int(req.BfregIndex)
		if req.Flags&abi.MLX5_QP_FLAG_BFREG_INDEX == 0 {
			// Low-latency bfregs (the last ones) are dedicated while
			// free; then the least shared of the others; bfreg 0 last.
			idx = -1
			for i := ctx.totBfregs - ctx.lowLat; i < ctx.totBfregs; i++ {
				if ctx.bfregQPs[i] == 0 {
					idx = i
					break
				}
			}
			if idx < 0 {
				best := 0
				for i := 1; i < ctx.totBfregs-ctx.lowLat; i++ {
					if best == 0 || ctx.bfregQPs[i] < ctx.bfregQPs[best] {
						best = i
					}
				}
				idx = best
			}
		}
		if idx >= ctx.totBfregs {
			return nil, unix.EINVAL
		}
		ctx.bfregQPs[idx]++
		p := ctx.staticPages[idx/bfPerUAR]
		q.bfregs = []bfreg{{page: p, off: uarBFReg + idx%bfPerUAR*bfRegSize}}
		resp.BfregIndex = uint32(idx)
	}
	rqBytes := int(rq << shift)
	sqb := req.BufAddr + uint64(rqBytes)
	if b := req.SqBufAddr(); b != 0 {
		sqb = b
	}
	pins, v, err := pinRanges([2]uint64{req.BufAddr, uint64(rqBytes)}, [2]uint64{sqb, uint64(sq) * bb}, [2]uint64{req.DbAddr, 8})
	if err != nil {
		return nil, err
	}
	q.pins, q.rq, q.sq, q.db = pins, v[0], v[1], v[2]
	q.qpn = d.nextQPN
	d.nextQPN++
	q.handle = ctx.add(q)
	d.qps[q.qpn] = q
	pd.users++
	scq.users++
	if rcq != nil {
		rcq.users++
	}
	if srq != nil {
		srq.users++
	}
	clear(dout)
	copy(dout, abi.Bytes(&resp))
	return q, nil
}

func (u *ufile) cmdCreateQP(in, out, din, dout []byte) error {
	var req abi.IbUverbsCreateQp
	copy(abi.Bytes(&req), in)
	a := qpCreate{userHandle: req.UserHandle, pd: req.PdHandle, scq: req.SendCqHandle, rcq: req.RecvCqHandle,
		srq: req.SrqHandle, hasSRQ: req.IsSrq != 0, typ: req.QpType, sigAll: req.SqSigAll != 0,
		cap: abi.IbUverbsQpCap{MaxSendWr: req.MaxSendWr, MaxRecvWr: req.MaxRecvWr, MaxSendSge: req.MaxSendSge,
			MaxRecvSge: req.MaxRecvSge, MaxInlineData: req.MaxInlineData}}
	q, err := u.createQP(a, din, dout)
	if err != nil {
		return err
	}
	r := abi.IbUverbsCreateQpResp{QpHandle: q.handle, Qpn: q.qpn, MaxSendWr: a.cap.MaxSendWr, MaxRecvWr: a.cap.MaxRecvWr,
		MaxSendSge: a.cap.MaxSendSge, MaxRecvSge: a.cap.MaxRecvSge, MaxInlineData: a.cap.MaxInlineData}
	copy(out, abi.Bytes(&r))
	return nil
}

func (u *ufile) cmdExCreateQP(in, out, din, dout []byte) error {
	var req abi.IbUverbsExCreateQp
	copy(abi.Bytes(&req), in)
	if req.CompMask != 0 || req.CreateFlags != 0 {
		return unix.EOPNOTSUPP
	}
	a := qpCreate{userHandle: req.UserHandle, pd: req.PdHandle, scq: req.SendCqHandle, rcq: req.RecvCqHandle,
		srq: req.SrqHandle, hasSRQ: req.IsSrq != 0, typ: req.QpType, sigAll: req.SqSigAll != 0,
		cap: abi.IbUverbsQpCap{MaxSendWr: req.MaxSendWr, MaxRecvWr: req.MaxRecvWr, MaxSendSge: req.MaxSendSge,
			MaxRecvSge: req.MaxRecvSge, MaxInlineData: req.MaxInlineData}}
	q, err := u.createQP(a, din, dout)
	if err != nil {
		return err
	}
	r := abi.IbUverbsExCreateQpResp{Base: abi.IbUverbsCreateQpResp{QpHandle: q.handle, Qpn: q.qpn, MaxSendWr: a.cap.MaxSendWr,
		MaxRecvWr: a.cap.MaxRecvWr, MaxSendSge: a.cap.MaxSendSge, MaxRecvSge: a.cap.MaxRecvSge, MaxInlineData: a.cap.MaxInlineData}}
	r.ResponseLength = uint32(min(len(out), size[abi.IbUverbsExCreateQpResp]()))
	copy(out, abi.Bytes(&r))
	return nil
}

func (u *ufile) destroyQP(h uint32, r *abi.IbUverbsDestroyQpResp) error {
	q, ok := u.ctx.qpOf(h)
	if !ok {
		return unix.EINVAL
	}
	if q.typ == qptXRCTgt {
		delete(u.ctx.objs, h)
		u.d.dropTgt(q)
		r.EventsReported = q.events
		return nil
	}
	delete(u.ctx.objs, h)
	delete(u.d.qps, q.qpn)
	q.pins.release()
	q.pd.users--
	q.scq.users--
	if q.rcq != nil {
		q.rcq.users--
	}
	if q.srq != nil {
		q.srq.users--
	}
	if !u.ctx.dyn && len(q.bfregs) == 1 {
		b := q.bfregs[0]
		u.ctx.bfregQPs[int(b.page.id)*bfPerUAR+(b.off-uarBFReg)/bfRegSize]--
	}
	r.EventsReported = q.events
	return nil
}

func (u *ufile) cmdDestroyQP(in, out, din, dout []byte) error {
	var req abi.IbUverbsDestroyQp
	copy(abi.Bytes(&req), in)
	var r abi.IbUverbsDestroyQpResp
	if err := u.destroyQP(req.QpHandle, &r); err != nil {
		return err
	}
	copy(out, abi.Bytes(&r))
	return nil
}

// QP attribute mask bits (enum ib_qp_attr_mask).
const (
	maskState         = 1 << 0
	maskCurState      = 1 << 1
	maskAccess        = 1 << 3
	maskPKey          = 1 << 4
	maskPort          = 1 << 5
	maskQKey          = 1 << 6
	maskAV            = 1 << 7
	maskPathMTU       = 1 << 8
	maskTimeout       = 1 << 9
	maskRetryCnt      = 1 << 10
	maskRNRRetry      = 1 << 11
	maskRQPSN         = 1 << 12
	maskMaxRdAtomic   = 1 << 13
	maskMinRNRTimer   = 1 << 15
	maskSQPSN         = 1 << 16
	maskMaxDestRdAtom = 1 << 17
	maskDestQPN       = 1 << 20
	maskRateLimit     = 1 << 25
	maskLegacy        = 1<<21 - 1
)

// required attributes of each transition, per QP type (IBTA's QP state
// table, as the kernel's ib_modify_qp_is_ok has it).
func required(typ, cur, next uint8) (need uint32, ok bool) {
	switch {
	case next == qpsReset || next == qpsErr:
		return 0, true
	case cur == qpsReset && next == qpsInit:
		if typ == qptUD {
			return maskPKey | maskPort | maskQKey, true
		}
		return maskPKey | maskPort | maskAccess, true
	case cur == qpsInit && next == qpsInit:
		return 0, true
	case cur == qpsInit && next == qpsRTR:
		switch typ {
		case qptRC:
			return maskAV | maskPathMTU | maskDestQPN | maskRQPSN | maskMaxDestRdAtom | maskMinRNRTimer, true
		case qptUC:
			return maskAV | maskPathMTU | maskDestQPN | maskRQPSN, true
		}
		return 0, true
	case cur == qpsRTR && next == qpsRTS:
		if typ == qptRC {
			return maskSQPSN | maskTimeout | maskRetryCnt | maskRNRRetry | maskMaxRdAtomic, true
		}
		return maskSQPSN, true
	case cur == qpsRTS && (next == qpsRTS || next == qpsSQD), cur == qpsSQD && (next == qpsRTS || next == qpsSQD),
		cur == qpsSQE && next == qpsRTS:
		return 0, true
	}
	return 0, false
}

func (u *ufile) modifyQP(m *abi.IbUverbsModifyQp, rateLimit bool) error {
	d := u.d
	q, ok := u.ctx.qpOf(m.QpHandle)
	if !ok {
		return unix.EINVAL
	}
	mask := m.AttrMask
	if mask&^maskLegacy != 0 {
		return unix.EINVAL
	}
	mask = xrcMask(q.typ, mask)
	if mask&maskCurState != 0 && m.CurQpState != q.state {
		return unix.EINVAL
	}
	next := q.state
	if mask&maskState != 0 {
		next = m.QpState
	}
	if next > qpsErr {
		return unix.EINVAL
	}
	need, ok := required(q.typ, q.state, next)
	if q.typ == qptXRCIni || q.typ == qptXRCTgt {
		need, ok = xrcRequired(q.typ, q.state, next)
	}
	if !ok || mask&need != need {
		return unix.EINVAL
	}
	if mask&maskPort != 0 && m.PortNum != 1 {
		return unix.EINVAL
	}
	if mask&maskAV != 0 {
		if m.Dest.PortNum != 0 && m.Dest.PortNum != 1 || m.Dest.IsGlobal != 0 && int(m.Dest.SgidIndex) >= len(d.gids) {
			return unix.EINVAL
		}
	}
	if mask&maskPathMTU != 0 && (m.PathMtu < 1 || m.PathMtu > mtu4096) {
		return unix.EINVAL
	}
	if mask&maskPort != 0 {
		q.port = m.PortNum
	}
	if mask&maskPKey != 0 {
		q.pkeyIndex = m.PkeyIndex
	}
	if mask&maskQKey != 0 {
		q.qkey = m.Qkey
	}
	if mask&maskAccess != 0 {
		q.access = m.QpAccessFlags
	}
	if mask&maskAV != 0 {
		q.av = dest{dlid: m.Dest.Dlid, global: m.Dest.IsGlobal != 0, dgid: m.Dest.Dgid, sgid: m.Dest.SgidIndex, hopLimit: m.Dest.HopLimit, sl: m.Dest.Sl}
	}
	if mask&maskPathMTU != 0 {
		q.pathMTU = m.PathMtu
	}
	if mask&maskDestQPN != 0 {
		q.destQPN = m.DestQpNum
	}
	if mask&maskRNRRetry != 0 {
		q.rnrRetry = m.RnrRetry
	}
	if mask&maskMinRNRTimer != 0 {
		q.minRNR = m.MinRnrTimer
	}
	if mask&maskRetryCnt != 0 {
		q.retryCnt = m.RetryCnt
	}
	if mask&maskTimeout != 0 {
		q.timeout = m.Timeout
	}
	if mask&maskSQPSN != 0 {
		q.sqPSN = m.SqPsn
	}
	if mask&maskRQPSN != 0 {
		q.rqPSN = m.RqPsn
	}
	if mask&maskMaxRdAtomic != 0 {
		q.maxRd = m.MaxRdAtomic
	}
	if mask&maskMaxDestRdAtom != 0 {
		q.maxDestRd = m.MaxDestRdAtomic
	}
	if mask&maskState != 0 {
		prev := q.state
		q.state = next
		switch {
		case next == qpsReset:
			q.sqPI, q.sqCI, q.rqPI, q.rqCI, q.lastDBCheck = 0, 0, 0, 0, 0
			q.rnrTries, q.retryTries = 0, 0
		case prev == qpsReset && next == qpsInit:
			if q.db != nil && ne.Uint64(q.db) != 0 {
				d.violation("QP %d leaves RESET with doorbell record %x (the counters start at 0)", q.qpn, q.db)
			}
		case next == qpsErr && prev != qpsErr:
			d.learn(q)
			d.flush(q)
		}
	}
	return nil
}

func (u *ufile) cmdModifyQP(in, out, din, dout []byte) error {
	var req abi.IbUverbsModifyQp
	copy(abi.Bytes(&req), in)
	return u.modifyQP(&req, false)
}

func (u *ufile) cmdExModifyQP(in, out, din, dout []byte) error {
	var req abi.IbUverbsExModifyQp
	copy(abi.Bytes(&req), in)
	clear(out)
	ucmd, err := modifyUcmd(din)
	if err != nil {
		return err
	}
	var prev uint8
	if q, ok := u.ctx.qpOf(req.Base.QpHandle); ok {
		prev = q.state
	}
	if err := u.modifyQP(&req.Base, true); err != nil {
		return err
	}
	if len(din) > 0 {
		u.modifyECE(req.Base.QpHandle, prev, ucmd.EceOptions, dout)
	}
	return nil
}

func (u *ufile) cmdQueryQP(in, out, din, dout []byte) error {
	var req abi.IbUverbsQueryQp
	copy(abi.Bytes(&req), in)
	q, ok := u.ctx.qpOf(req.QpHandle)
	if !ok {
		return unix.EINVAL
	}
	r := abi.IbUverbsQueryQpResp{
		MaxSendWr: q.caps[0], MaxRecvWr: q.caps[1], MaxSendSge: q.caps[2], MaxRecvSge: q.caps[3], MaxInlineData: q.caps[4],
		Qkey: q.qkey, RqPsn: q.rqPSN, SqPsn: q.sqPSN, DestQpNum: q.destQPN, QpAccessFlags: q.access, PkeyIndex: q.pkeyIndex,
		QpState: q.state, CurQpState: q.state, PathMtu: q.pathMTU, MaxRdAtomic: q.maxRd, MaxDestRdAtomic: q.maxDestRd,
		MinRnrTimer: q.minRNR, PortNum: q.port, Timeout: q.timeout, RetryCnt: q.retryCnt, RnrRetry: q.rnrRetry,
	}
	if q.sigAll {
		r.SqSigAll = 1
	}
	r.Dest = abi.IbUverbsQpDest{Dlid: q.av.dlid, Dgid: q.av.dgid, SgidIndex: q.av.sgid, HopLimit: q.av.hopLimit, Sl: q.av.sl, PortNum: q.port}
	if q.av.global {
		r.Dest.IsGlobal = 1
	}
	copy(out, abi.Bytes(&r))
	return nil
}
