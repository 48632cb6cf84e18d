package model

import (
	"math/bits"

	"github.com/goverbs/goverbs/abi"
	"golang.org/x/sys/unix"
)

// srqGeometry is how the mlx5 kernel driver sizes an SRQ from max_wr and
// max_sge: pow2(max_wr+1) WQEs of max(32, pow2(16+16·max_sge)) bytes.
func srqGeometry(maxWR, maxSGE uint32) (cnt, shift uint32) {
	cnt = pow2(maxWR + 1)
	sz := max(pow2(16+16*maxSGE), 32)
	return cnt, uint32(bits.TrailingZeros32(sz))
}

func (u *ufile) cmdCreateSRQ(in, out, din, dout []byte) error {
	d, ctx := u.d, u.ctx
	var req abi.IbUverbsCreateSrq
	copy(abi.Bytes(&req), in)
	p, ok := ctx.objs[req.PdHandle].(*mpd)
	if !ok || req.MaxWr == 0 || req.MaxWr >= maxSRQWR || req.MaxSge > maxSRQSGE {
		return unix.EINVAL
	}
	var dr abi.Mlx5IbCreateSrq
	if len(din) < 24 {
		return unix.EINVAL
	}
	copy(abi.Bytes(&dr), din)
	if dr.Flags != 0 || dr.BufAddr == 0 || dr.DbAddr == 0 || dr.DbAddr%8 != 0 || ctx.cqeVersion == 1 && dr.Uidx >= 0xffffff {
		return unix.EINVAL
	}
	cnt, shift := srqGeometry(req.MaxWr, req.MaxSge)
	s := &msrq{ctx: ctx, pd: p, userHandle: req.UserHandle, cnt: cnt, shift: shift, maxWR: cnt - 1, maxSGE: req.MaxSge,
		uidx: dr.Uidx, limit: req.SrqLimit, armed: req.SrqLimit > 0}
	pins, v, err := pinRanges([2]uint64{dr.BufAddr, uint64(cnt << shift)}, [2]uint64{dr.DbAddr, 8})
	if err != nil {
		return err
	}
	s.pins, s.buf, s.db = pins, v[0], v[1]
	s.srqn = d.nextSRQN
	d.nextSRQN++
	s.handle = ctx.add(s)
	d.srqs[s.srqn] = s
	p.users++
	r := abi.IbUverbsCreateSrqResp{SrqHandle: s.handle, MaxWr: s.maxWR, MaxSge: s.maxSGE, Srqn: s.srqn}
	copy(out, abi.Bytes(&r))
	clear(dout)
	if len(dout) >= 4 {
		ne.PutUint32(dout, s.srqn)
	}
	return nil
}

func (u *ufile) cmdModifySRQ(in, out, din, dout []byte) error {
	var req abi.IbUverbsModifySrq
	copy(abi.Bytes(&req), in)
	s, ok := u.ctx.objs[req.SrqHandle].(*msrq)
	if !ok || req.AttrMask&^3 != 0 {
		return unix.EINVAL
	}
	if req.AttrMask&1 != 0 {
		return unix.EINVAL // mlx5 cannot resize an SRQ
	}
	if req.AttrMask&2 != 0 {
		if req.SrqLimit > s.maxWR {
			return unix.EINVAL
		}
		s.limit, s.armed = req.SrqLimit, req.SrqLimit > 0
		u.d.learnSRQ(s)
		u.d.checkSRQLimit(s)
	}
	return nil
}

func (u *ufile) cmdQuerySRQ(in, out, din, dout []byte) error {
	var req abi.IbUverbsQuerySrq
	copy(abi.Bytes(&req), in)
	s, ok := u.ctx.objs[req.SrqHandle].(*msrq)
	if !ok {
		return unix.EINVAL
	}
	r := abi.IbUverbsQuerySrqResp{MaxWr: s.maxWR, MaxSge: s.maxSGE, SrqLimit: s.limit}
	copy(out, abi.Bytes(&r))
	return nil
}

func (u *ufile) destroySRQ(h uint32, r *abi.IbUverbsDestroySrqResp) error {
	s, ok := u.ctx.objs[h].(*msrq)
	if !ok {
		return unix.EINVAL
	}
	if s.users > 0 {
		return unix.EBUSY
	}
	delete(u.ctx.objs, h)
	delete(u.d.srqs, s.srqn)
	s.pins.release()
	s.pd.users--
	if s.cq != nil {
		s.cq.users--
		u.d.dropXRCD(s.xrcd)
	}
	r.EventsReported = s.events
	return nil
}

func (u *ufile) cmdDestroySRQ(in, out, din, dout []byte) error {
	var req abi.IbUverbsDestroySrq
	copy(abi.Bytes(&req), in)
	var r abi.IbUverbsDestroySrqResp
	if err := u.destroySRQ(req.SrqHandle, &r); err != nil {
		return err
	}
	copy(out, abi.Bytes(&r))
	return nil
}
