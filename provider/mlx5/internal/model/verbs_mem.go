package model

import (
	"github.com/goverbs/goverbs/abi"
	"golang.org/x/sys/unix"
)

func (u *ufile) cmdAllocPD(in, out, din, dout []byte) error {
	p := &mpd{ctx: u.ctx}
	p.handle = u.ctx.add(p)
	r := abi.IbUverbsAllocPdResp{PdHandle: p.handle}
	copy(out, abi.Bytes(&r))
	if len(dout) >= 4 {
		ne.PutUint32(dout, p.handle) // mlx5_ib_alloc_pd_resp.pdn
	}
	return nil
}

func (u *ufile) deallocPD(h uint32) error {
	p, ok := u.ctx.objs[h].(*mpd)
	if !ok {
		return unix.EINVAL
	}
	if p.users > 0 {
		return unix.EBUSY
	}
	delete(u.ctx.objs, h)
	return nil
}

func (u *ufile) cmdDeallocPD(in, out, din, dout []byte) error {
	var req abi.IbUverbsDeallocPd
	copy(abi.Bytes(&req), in)
	return u.deallocPD(req.PdHandle)
}

func (u *ufile) cmdRegMR(in, out, din, dout []byte) error {
	var req abi.IbUverbsRegMr
	copy(abi.Bytes(&req), in)
	p, ok := u.ctx.objs[req.PdHandle].(*mpd)
	if !ok || req.Length == 0 {
		return unix.EINVAL
	}
	const lw = abi.IB_UVERBS_ACCESS_LOCAL_WRITE
	if req.AccessFlags&(abi.IB_UVERBS_ACCESS_REMOTE_WRITE|abi.IB_UVERBS_ACCESS_REMOTE_ATOMIC) != 0 && req.AccessFlags&lw == 0 {
		return unix.EINVAL
	}
	known := uint32(lw | abi.IB_UVERBS_ACCESS_REMOTE_WRITE | abi.IB_UVERBS_ACCESS_REMOTE_READ | abi.IB_UVERBS_ACCESS_REMOTE_ATOMIC |
		abi.IB_UVERBS_ACCESS_MW_BIND | abi.IB_UVERBS_ACCESS_OPTIONAL_RANGE | abi.IB_UVERBS_ACCESS_ON_DEMAND)
	if req.AccessFlags&^known != 0 {
		return unix.EINVAL
	}
	odp := req.AccessFlags&abi.IB_UVERBS_ACCESS_ON_DEMAND != 0
	if err := u.d.checkODPReg(odp, req.Start, req.Length, req.HcaVa); err != nil {
		return err
	}
	d := u.d
	key := d.nextKey<<8 | 0x42
	d.nextKey++
	m := &mmr{key: key, pd: p, start: req.Start, length: req.Length, iova: req.HcaVa, access: req.AccessFlags, odp: odp,
		implicit: odp && isImplicit(req.Start, req.Length)}
	if odp && !m.implicit {
		// mlx5_ib_init_odp_mr: what the process has present is mapped at
		// once.
		if lo, hi, ok := pages(m.start, m.length); ok {
			m.snapshot(lo, hi)
		}
	}
	m.handle = u.ctx.add(m)
	d.mrs[key] = m
	p.users++
	r := abi.IbUverbsRegMrResp{MrHandle: m.handle, Lkey: key, Rkey: key}
	copy(out, abi.Bytes(&r))
	return nil
}

func (u *ufile) deregMR(h uint32) error {
	m, ok := u.ctx.objs[h].(*mmr)
	if !ok {
		return unix.EINVAL
	}
	delete(u.ctx.objs, h)
	delete(u.d.mrs, m.key)
	m.pd.users--
	return nil
}

func (u *ufile) cmdDeregMR(in, out, din, dout []byte) error {
	var req abi.IbUverbsDeregMr
	copy(abi.Bytes(&req), in)
	return u.deregMR(req.MrHandle)
}

func (u *ufile) cmdCreateAH(in, out, din, dout []byte) error {
	var req abi.IbUverbsCreateAh
	copy(abi.Bytes(&req), in)
	p, ok := u.ctx.objs[req.PdHandle].(*mpd)
	if !ok || req.Attr.PortNum != 1 || req.Attr.IsGlobal != 0 && int(req.Attr.Grh.SgidIndex) >= len(u.d.gids) {
		return unix.EINVAL
	}
	a := &mah{pd: p}
	a.handle = u.ctx.add(a)
	p.users++
	r := abi.IbUverbsCreateAhResp{AhHandle: a.handle}
	copy(out, abi.Bytes(&r))
	if len(dout) >= 4 {
		clear(dout)
		ne.PutUint32(dout, uint32(min(len(dout), 16))) // response_length; dmac stays zero on InfiniBand
	}
	return nil
}

func (u *ufile) destroyAH(h uint32) error {
	a, ok := u.ctx.objs[h].(*mah)
	if !ok {
		return unix.EINVAL
	}
	delete(u.ctx.objs, h)
	a.pd.users--
	return nil
}

func (u *ufile) cmdDestroyAH(in, out, din, dout []byte) error {
	var req abi.IbUverbsDestroyAh
	copy(abi.Bytes(&req), in)
	return u.destroyAH(req.AhHandle)
}

func (u *ufile) cmdCreateCompChannel(in, out, din, dout []byte) error {
	s, err := newEventSock()
	if err != nil {
		return err
	}
	u.d.channels[s.user] = &channel{s}
	r := abi.IbUverbsCreateCompChannelResp{Fd: uint32(s.user)}
	copy(out, abi.Bytes(&r))
	return nil
}
