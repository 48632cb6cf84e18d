package model

import (
	"math/bits"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/mmap"
	"golang.org/x/sys/unix"
)

// Device limits the model reports.
const (
	maxQPWR      = 1 << 15
	maxSGE       = 30
	maxCQE       = 1<<22 - 1
	maxSRQWR     = 1 << 15
	maxSRQSGE    = 31
	maxSQDesc    = 512
	maxRQDesc    = 512
	maxMsg       = 1 << 31
	numVectors   = 4
	vendorID     = 0x02c9 // Mellanox
	vendorPartID = 4119   // ConnectX-5
	mtu4096      = 5
)

func pow2(n uint32) uint32 {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len32(n-1)
}

func isPow2(n uint32) bool { return n != 0 && n&(n-1) == 0 }

// ioctl dispatches an RDMA_VERBS_IOCTL by object and method. Methods the
// model does not implement answer EPROTONOSUPPORT, so uverbs falls back to
// the write() form of that verb.
func (u *ufile) ioctl(c *call) error {
	d := u.d
	type om struct{ o, m uint16 }
	k := om{c.object, c.method}
	if k == (om{abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_GET_CONTEXT}) {
		return u.ioctlGetContext(c)
	}
	if u.ctx == nil {
		return unix.EINVAL
	}
	switch k {
	case om{abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_INVOKE_WRITE}:
		if d.o.NoInvokeWrite {
			return unix.EPROTONOSUPPORT
		}
		num, _ := c.u64(abi.UVERBS_ATTR_WRITE_CMD)
		in, ok := c.in(abi.UVERBS_ATTR_CORE_IN)
		if !ok {
			return unix.ENOSPC
		}
		var out, din, dout []byte
		if c.find(abi.UVERBS_ATTR_CORE_OUT) != nil {
			out, _ = c.out(abi.UVERBS_ATTR_CORE_OUT)
		}
		din, _ = c.in(attrUHWIn)
		if c.find(attrUHWOut) != nil {
			dout, _ = c.out(attrUHWOut)
		}
		return u.command(uint32(num), in, out, din, dout)
	case om{abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_PORT}:
		port, _ := c.u64(abi.UVERBS_ATTR_QUERY_PORT_PORT_NUM)
		a := c.find(abi.UVERBS_ATTR_QUERY_PORT_RESP)
		if a == nil || int(a.len) != size[abi.IbUverbsQueryPortRespEx]() {
			return unix.EINVAL
		}
		if port != 1 {
			return unix.EINVAL
		}
		out, _ := c.out(abi.UVERBS_ATTR_QUERY_PORT_RESP)
		r := abi.IbUverbsQueryPortRespEx{LegacyResp: d.portAttr()}
		copy(out, abi.Bytes(&r))
		return nil
	case om{abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_GID_ENTRY}:
		port, _ := c.u64(abi.UVERBS_ATTR_QUERY_GID_ENTRY_PORT)
		idx, _ := c.u64(abi.UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX)
		if port != 1 || idx >= uint64(len(d.gids)) {
			return unix.EINVAL
		}
		out, ok := c.out(abi.UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY)
		if !ok || len(out) < size[abi.IbUverbsGidEntry]() {
			return unix.EINVAL
		}
		e := d.gidEntry(int(idx))
		copy(out, abi.Bytes(&e))
		return nil
	case om{abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_GID_TABLE}:
		esz, _ := c.u64(abi.UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE)
		if int(esz) < size[abi.IbUverbsGidEntry]() {
			return unix.EINVAL
		}
		out, _ := c.out(abi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES)
		num, _ := c.out(abi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES)
		if len(out) < len(d.gids)*int(esz) || len(num) != 8 {
			return unix.EINVAL
		}
		for i := range d.gids {
			e := d.gidEntry(i)
			copy(out[i*int(esz):], abi.Bytes(&e))
		}
		ne.PutUint64(num, uint64(len(d.gids)))
		return nil
	case om{abi.UVERBS_OBJECT_ASYNC_EVENT, abi.UVERBS_METHOD_ASYNC_EVENT_ALLOC}:
		if u.ctx.async != nil {
			return unix.EINVAL
		}
		s, err := newEventSock()
		if err != nil {
			return err
		}
		u.ctx.async = s
		c.setData(abi.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, uint64(s.user))
		return nil
	case om{abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_CREATE}:
		cqe, _ := c.u64(abi.UVERBS_ATTR_CREATE_CQ_CQE)
		uh, _ := c.u64(abi.UVERBS_ATTR_CREATE_CQ_USER_HANDLE)
		ch := int64(-1)
		if v, ok := c.u64(abi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL); ok {
			ch = int64(int32(v))
		}
		if f, _ := c.u64(abi.UVERBS_ATTR_CREATE_CQ_FLAGS); f != 0 {
			return unix.EOPNOTSUPP
		}
		din, _ := c.in(attrUHWIn)
		dout, _ := c.out(attrUHWOut)
		q, err := u.createCQ(uh, uint32(cqe), int(ch), din, dout)
		if err != nil {
			return err
		}
		c.setData(abi.UVERBS_ATTR_CREATE_CQ_HANDLE, uint64(q.handle))
		if out, ok := c.out(abi.UVERBS_ATTR_CREATE_CQ_RESP_CQE); ok {
			ne.PutUint32(out, 1<<q.log-1)
		}
		return nil
	case om{abi.UVERBS_OBJECT_QP, abi.UVERBS_METHOD_QP_CREATE}:
		var a qpCreate
		a.pd = handleOf(c, abi.UVERBS_ATTR_CREATE_QP_PD_HANDLE)
		a.scq = handleOf(c, abi.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE)
		a.rcq = handleOf(c, abi.UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE)
		if c.find(abi.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE) != nil {
			a.srq, a.hasSRQ = handleOf(c, abi.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE), true
		}
		if c.find(abi.UVERBS_ATTR_CREATE_QP_XRCD_HANDLE) != nil || c.find(abi.UVERBS_ATTR_CREATE_QP_IND_TABLE_HANDLE) != nil {
			return unix.EOPNOTSUPP
		}
		a.userHandle, _ = c.u64(abi.UVERBS_ATTR_CREATE_QP_USER_HANDLE)
		capIn, ok := c.in(abi.UVERBS_ATTR_CREATE_QP_CAP)
		if !ok || len(capIn) != size[abi.IbUverbsQpCap]() {
			return unix.EINVAL
		}
		copy(abi.Bytes(&a.cap), capIn)
		t, _ := c.u64(abi.UVERBS_ATTR_CREATE_QP_TYPE)
		a.typ = uint8(t)
		flags, _ := c.u64(abi.UVERBS_ATTR_CREATE_QP_FLAGS)
		if flags&^abi.IB_UVERBS_QP_CREATE_SQ_SIG_ALL != 0 {
			return unix.EOPNOTSUPP
		}
		a.sigAll = flags != 0
		din, _ := c.in(attrUHWIn)
		dout, _ := c.out(attrUHWOut)
		q, err := u.createQP(a, din, dout)
		if err != nil {
			return err
		}
		c.setData(abi.UVERBS_ATTR_CREATE_QP_HANDLE, uint64(q.handle))
		if out, ok := c.out(abi.UVERBS_ATTR_CREATE_QP_RESP_CAP); ok {
			capOut := a.cap
			copy(out, abi.Bytes(&capOut))
		}
		if out, ok := c.out(abi.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM); ok {
			ne.PutUint32(out, q.qpn)
		}
		return nil
	case om{abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_DESTROY}:
		var r abi.IbUverbsDestroyCqResp
		if err := u.destroyCQ(handleOf(c, 0), &r); err != nil {
			return err
		}
		if out, ok := c.out(abi.UVERBS_ATTR_DESTROY_CQ_RESP); ok {
			copy(out, abi.Bytes(&r))
		}
		return nil
	case om{abi.UVERBS_OBJECT_QP, abi.UVERBS_METHOD_QP_DESTROY}:
		var r abi.IbUverbsDestroyQpResp
		if err := u.destroyQP(handleOf(c, 0), &r); err != nil {
			return err
		}
		if out, ok := c.out(abi.UVERBS_ATTR_DESTROY_QP_RESP); ok {
			copy(out, abi.Bytes(&r))
		}
		return nil
	case om{abi.UVERBS_OBJECT_SRQ, abi.UVERBS_METHOD_SRQ_DESTROY}:
		var r abi.IbUverbsDestroySrqResp
		if err := u.destroySRQ(handleOf(c, 0), &r); err != nil {
			return err
		}
		if out, ok := c.out(abi.UVERBS_ATTR_DESTROY_SRQ_RESP); ok {
			copy(out, abi.Bytes(&r))
		}
		return nil
	case om{abi.UVERBS_OBJECT_PD, abi.UVERBS_METHOD_PD_DESTROY}:
		return u.deallocPD(handleOf(c, 0))
	case om{abi.UVERBS_OBJECT_MR, abi.UVERBS_METHOD_MR_DESTROY}:
		return u.deregMR(handleOf(c, 0))
	case om{abi.UVERBS_OBJECT_AH, abi.UVERBS_METHOD_AH_DESTROY}:
		return u.destroyAH(handleOf(c, 0))
	case om{abi.MLX5_IB_OBJECT_UAR, abi.MLX5_IB_METHOD_UAR_OBJ_ALLOC}:
		if d.o.NoDynamicUAR {
			return unix.EPROTONOSUPPORT
		}
		return u.allocUAR(c)
	case om{abi.MLX5_IB_OBJECT_UAR, abi.MLX5_IB_METHOD_UAR_OBJ_DESTROY}:
		if d.o.NoDynamicUAR {
			return unix.EPROTONOSUPPORT
		}
		h := handleOf(c, abi.MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE)
		p, ok := u.ctx.objs[h].(*uarPage)
		if !ok {
			return unix.EINVAL
		}
		delete(u.ctx.objs, h)
		p.destroyed = true
		u.ctx.maybeFree(p)
		return nil
	}
	return unix.EPROTONOSUPPORT
}

func handleOf(c *call, id uint16) uint32 {
	v, _ := c.u64(id)
	return uint32(v)
}

// newContext runs the mlx5 driver's side of GET_CONTEXT on the ucontext
// request din, answering in dout.
func (u *ufile) newContext(din, dout []byte) error {
	d := u.d
	o := d.o
	if u.ctx != nil {
		return unix.EINVAL
	}
	if len(din) < 8 {
		return unix.EINVAL
	}
	for _, b := range din[min(len(din), o.KnownReqLen):] {
		if b != 0 {
			return unix.EINVAL // a field this kernel does not know, not zero
		}
	}
	n := min(len(din), o.KnownReqLen)
	var req abi.Mlx5IbAllocUcontextReqV2
	copy(abi.Bytes(&req), din[:n])
	if req.Flags&^abi.MLX5_IB_ALLOC_UCTX_DEVX != 0 || req.CompMask != 0 {
		return unix.EINVAL
	}
	c := &ucontext{u: u, reqLen: n, objs: map[uint32]any{}, dynPages: map[uint32]*uarPage{}}
	if req.Flags&abi.MLX5_IB_ALLOC_UCTX_DEVX != 0 {
		if o.RejectDEVX {
			return unix.EOPNOTSUPP
		}
		c.devx = true
	}
	if n > 16 {
		c.cqeVersion = uint8(min(int(req.MaxCqeVersion), o.MaxCQEVersion))
	}
	c.dyn = n >= 32 && req.LibCaps&abi.MLX5_LIB_CAP_DYN_UAR != 0 && !o.NoDynamicUAR
	if !c.dyn {
		tot := max(int(req.TotalNumBfregs), 2)
		tot = (tot + bfPerUAR - 1) &^ (bfPerUAR - 1)
		if int(req.NumLowLatencyBfregs) > tot-1 {
			return unix.EINVAL
		}
		c.totBfregs, c.lowLat = tot, int(req.NumLowLatencyBfregs)
		c.bfregQPs = make([]int, tot)
		for i := 0; i < tot/bfPerUAR; i++ {
			m, err := newUARPage()
			if err != nil {
				c.u = nil
				for _, p := range c.staticPages {
					p.mem.Close()
				}
				return err
			}
			c.staticPages = append(c.staticPages, &uarPage{mem: m, id: uint32(i), bf: !o.NoBlueFlame})
		}
	}
	resp := abi.Mlx5IbAllocUcontextResp{
		QpTabSize: 1 << 18, BfRegSize: bfRegSize, TotBfregs: uint32(c.totBfregs), CacheLineSize: 64,
		MaxSqDescSz: maxSQDesc, MaxRqDescSz: maxRQDesc, MaxSendWqebb: maxQPWR, MaxRecvWr: maxQPWR, MaxSrqRecvWr: maxSRQWR,
		NumPorts: 1, CqeVersion: c.cqeVersion,
		CmdsSuppUhw:    abi.MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE | abi.MLX5_USER_CMDS_SUPP_UHW_CREATE_AH,
		LogUarSize:     12,
		NumUarsPerPage: uint32(mmap.PageSize() / uarSize),
	}
	if o.NoBlueFlame {
		resp.BfRegSize = 0
	}
	resp.ResponseLength = uint32(min(len(dout), size[abi.Mlx5IbAllocUcontextResp]()))
	copy(dout, abi.Bytes(&resp))
	u.ctx = c
	return nil
}

func (u *ufile) cmdGetContext(in, out, din, dout []byte) error {
	if err := u.newContext(din, dout); err != nil {
		return err
	}
	s, err := newEventSock()
	if err != nil {
		u.release()
		return err
	}
	u.ctx.async = s
	r := abi.IbUverbsGetContextResp{AsyncFd: uint32(s.user), NumCompVectors: numVectors}
	copy(out, abi.Bytes(&r))
	return nil
}

func (u *ufile) ioctlGetContext(c *call) error {
	din, _ := c.in(attrUHWIn)
	var dout []byte
	if c.find(attrUHWOut) != nil {
		dout, _ = c.out(attrUHWOut)
	}
	if err := u.newContext(din, dout); err != nil {
		return err
	}
	if out, ok := c.out(abi.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS); ok && len(out) == 4 {
		ne.PutUint32(out, numVectors)
	}
	if out, ok := c.out(abi.UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT); ok && len(out) == 8 {
		ne.PutUint64(out, abi.IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS)
	}
	return nil
}

// allocUAR is MLX5_IB_METHOD_UAR_OBJ_ALLOC.
func (u *ufile) allocUAR(c *call) error {
	d := u.d
	if !u.ctx.dyn {
		return unix.EOPNOTSUPP
	}
	t, _ := c.u64(abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE)
	switch t {
	case abi.MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF:
		if d.o.NoBlueFlame {
			return unix.EOPNOTSUPP
		}
	case abi.MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC:
	default:
		return unix.EINVAL
	}
	off, ok1 := c.out(abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET)
	length, ok2 := c.out(abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH)
	page, ok3 := c.out(abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID)
	if !ok1 || !ok2 || !ok3 || len(off) != 8 || len(length) != 4 || len(page) != 4 {
		return unix.EINVAL
	}
	m, err := newUARPage()
	if err != nil {
		return err
	}
	id := d.nextPageID
	d.nextPageID++
	p := &uarPage{mem: m, id: id, bf: t == abi.MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF}
	p.handle = u.ctx.add(p)
	u.ctx.dynPages[id] = p
	pg := uint64(mmapDynamic)<<8 | uint64(id&0xff) | uint64(id>>8)<<16
	ne.PutUint64(off, pg*uint64(mmap.PageSize()))
	ne.PutUint32(length, uint32(mmap.PageSize()))
	ne.PutUint32(page, id)
	c.setData(abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE, uint64(p.handle))
	return nil
}

func (d *Device) portAttr() abi.IbUverbsQueryPortResp {
	return abi.IbUverbsQueryPortResp{
		PortCapFlags: 1 << 16, // IB_PORT_... a CM-capable port: any non-zero value will do
		MaxMsgSz:     maxMsg, GidTblLen: uint32(len(d.gids)), PkeyTblLen: 1,
		Lid: d.lid, SmLid: 1, State: 4 /* ACTIVE */, MaxMtu: mtu4096, ActiveMtu: mtu4096,
		MaxVlNum: 4, SubnetTimeout: 18, ActiveWidth: 2 /* 4x */, ActiveSpeed: 32 /* EDR */, PhysState: 5, /* LinkUp */
		LinkLayer: 1, // InfiniBand
	}
}

func (d *Device) gidEntry(i int) abi.IbUverbsGidEntry {
	e := abi.IbUverbsGidEntry{GidIndex: uint32(i), PortNum: 1, GidType: 0 /* IB */}
	copy(abi.Bytes(&e)[0:16], d.gids[i][:])
	return e
}

func (d *Device) deviceAttr() abi.IbUverbsQueryDeviceResp {
	r := abi.IbUverbsQueryDeviceResp{
		FwVer: 16<<32 | 35<<16 | 1000, MaxMrSize: ^uint64(0), PageSizeCap: ^uint64(0xfff),
		VendorId: vendorID, VendorPartId: vendorPartID, HwVer: 0, MaxQp: 1 << 18, MaxQpWr: maxQPWR,
		DeviceCapFlags: 0, MaxSge: maxSGE, MaxSgeRd: maxSGE, MaxCq: 1 << 24, MaxCqe: maxCQE,
		MaxMr: 1 << 24, MaxPd: 1 << 24, MaxQpRdAtom: 16, MaxResRdAtom: 1 << 22, MaxQpInitRdAtom: 16,
		AtomicCap: 1 /* IBV_ATOMIC_HCA */, MaxAh: 1 << 30, MaxSrq: 1 << 23, MaxSrqWr: maxSRQWR - 1, MaxSrqSge: maxSRQSGE,
		MaxPkeys: 128, LocalCaAckDelay: 16, PhysPortCnt: 1,
	}
	var g [8]byte
	be.PutUint64(g[:], d.guid)
	r.NodeGuid = ne.Uint64(g[:])
	r.SysImageGuid = r.NodeGuid
	return r
}

func (u *ufile) cmdQueryDevice(in, out, din, dout []byte) error {
	r := u.d.deviceAttr()
	copy(out, abi.Bytes(&r))
	return nil
}

func (u *ufile) cmdExQueryDevice(in, out, din, dout []byte) error {
	r := abi.IbUverbsExQueryDeviceResp{Base: u.d.deviceAttr()}
	r.ResponseLength = uint32(min(len(out), size[abi.IbUverbsExQueryDeviceResp]()))
	clear(out)
	copy(out, abi.Bytes(&r))
	clear(dout)
	return nil
}

func (u *ufile) cmdQueryPort(in, out, din, dout []byte) error {
	var req abi.IbUverbsQueryPort
	copy(abi.Bytes(&req), in)
	if req.PortNum != 1 {
		return unix.EINVAL
	}
	r := u.d.portAttr()
	copy(out, abi.Bytes(&r))
	return nil
}

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
		abi.IB_UVERBS_ACCESS_MW_BIND | abi.IB_UVERBS_ACCESS_OPTIONAL_RANGE)
	if req.AccessFlags&^known != 0 {
		return unix.EINVAL
	}
	d := u.d
	key := d.nextKey<<8 | 0x42
	d.nextKey++
	m := &mmr{key: key, pd: p, start: req.Start, length: req.Length, iova: req.HcaVa, access: req.AccessFlags}
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

// createCQ is the mlx5 driver's CQ creation: the ring and doorbell record
// are the provider's memory, described by mlx5_ib_create_cq.
func (u *ufile) createCQ(userHandle uint64, cqe uint32, chFD int, din, dout []byte) (*mcq, error) {
	d, ctx := u.d, u.ctx
	var req abi.Mlx5IbCreateCq
	if len(din) < 24 {
		return nil, unix.EINVAL
	}
	copy(abi.Bytes(&req), din)
	if req.CqeSize != 64 && req.CqeSize != 128 || cqe < 1 || cqe > maxCQE || req.CqeCompEn != 0 {
		return nil, unix.EINVAL
	}
	if req.Flags&^(abi.MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX) != 0 || req.BufAddr == 0 || req.DbAddr == 0 || req.DbAddr%8 != 0 {
		return nil, unix.EINVAL
	}
	var p *uarPage
	switch {
	case req.Flags&abi.MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX != 0:
		p = ctx.dynPages[uint32(req.UarPageIndex)]
	case ctx.dyn:
		return nil, unix.EINVAL // dynamic UARs: the CQ must name one
	case len(ctx.staticPages) > 0:
		p = ctx.staticPages[0]
	}
	if p == nil {
		return nil, unix.EINVAL
	}
	var ch *channel
	if chFD >= 0 {
		if ch = d.channels[chFD]; ch == nil {
			return nil, unix.EINVAL
		}
	}
	n := pow2(cqe + 1)
	q := &mcq{ctx: ctx, userHandle: userHandle, ch: ch, cqeSize: int(req.CqeSize), log: uint32(bits.TrailingZeros32(n)), uar: p}
	pins, v, err := pinRanges([2]uint64{req.BufAddr, uint64(n) * uint64(q.cqeSize)}, [2]uint64{req.DbAddr, 8})
	if err != nil {
		return nil, err
	}
	q.pins, q.buf, q.db = pins, v[0], v[1]
	for i := 0; i < int(n); i++ {
		if q.buf[i*q.cqeSize+q.cqeSize-cqe64+cOpOwn]>>4 != cqeInvalid {
			d.violation("CQ created with CQE %d not marked INVALID (op_own %#x)", i, q.buf[i*q.cqeSize+q.cqeSize-cqe64+cOpOwn])
			break
		}
	}
	q.lastArm = be.Uint32(q.db[dbRecArm:])
	q.cqn = d.nextCQN
	d.nextCQN++
	q.handle = ctx.add(q)
	d.cqs[q.cqn] = q
	if len(dout) >= 4 {
		clear(dout)
		ne.PutUint32(dout, q.cqn)
	}
	return q, nil
}

func (u *ufile) cmdCreateCQ(in, out, din, dout []byte) error {
	var req abi.IbUverbsCreateCq
	copy(abi.Bytes(&req), in)
	q, err := u.createCQ(req.UserHandle, req.Cqe, int(req.CompChannel), din, dout)
	if err != nil {
		return err
	}
	r := abi.IbUverbsCreateCqResp{CqHandle: q.handle, Cqe: 1<<q.log - 1}
	copy(out, abi.Bytes(&r))
	return nil
}

func (u *ufile) cmdExCreateCQ(in, out, din, dout []byte) error {
	var req abi.IbUverbsExCreateCq
	copy(abi.Bytes(&req), in)
	if req.CompMask != 0 || req.Flags != 0 {
		return unix.EOPNOTSUPP
	}
	q, err := u.createCQ(req.UserHandle, req.Cqe, int(req.CompChannel), din, dout)
	if err != nil {
		return err
	}
	r := abi.IbUverbsExCreateCqResp{Base: abi.IbUverbsCreateCqResp{CqHandle: q.handle, Cqe: 1<<q.log - 1}}
	r.ResponseLength = uint32(min(len(out), size[abi.IbUverbsExCreateCqResp]()))
	copy(out, abi.Bytes(&r))
	return nil
}

// cmdResizeCQ is the mlx5 driver's resize: the provider's new ring is in
// mlx5_ib_resize_cq. The device writes a RESIZE CQE into the old ring at
// the producer index and goes on in the new ring after it.
func (u *ufile) cmdResizeCQ(in, out, din, dout []byte) error {
	d := u.d
	var req abi.IbUverbsResizeCq
	copy(abi.Bytes(&req), in)
	q, ok := u.ctx.objs[req.CqHandle].(*mcq)
	if !ok || req.Cqe < 1 || req.Cqe > maxCQE || len(din) < size[abi.Mlx5IbResizeCq]() {
		return unix.EINVAL
	}
	var dr abi.Mlx5IbResizeCq
	copy(abi.Bytes(&dr), din)
	n := pow2(req.Cqe + 1)
	r := abi.IbUverbsResizeCqResp{Cqe: n - 1}
	if n == 1<<q.log {
		copy(out, abi.Bytes(&r))
		return nil
	}
	if dr.CqeSize != 64 && dr.CqeSize != 128 || dr.BufAddr == 0 {
		return unix.EINVAL
	}
	ci := be.Uint32(q.db[dbRecSetCI:]) & 0xffffff
	if pending := (q.pi - ci) & 0xffffff; pending >= n || pending >= 1<<q.log {
		return unix.EINVAL // the CQEs waiting would not fit, or no room for the RESIZE CQE
	}
	var e [cqe64]byte
	e[cOpOwn] = cqeResize << 4
	armed := q.armed
	q.armed = false // the RESIZE CQE raises no event
	d.writeCQE(q, &e)
	q.armed = armed
	q.cqeSize = int(dr.CqeSize)
	q.log = uint32(bits.TrailingZeros32(n))
	pins, v, err := pinRanges([2]uint64{dr.BufAddr, uint64(n) * uint64(dr.CqeSize)})
	if err != nil {
		return err
	}
	q.pins = append(q.pins, pins...)
	q.buf = v[0]
	for i := 0; i < int(n); i++ {
		if q.buf[i*q.cqeSize+q.cqeSize-cqe64+cOpOwn]>>4 != cqeInvalid {
			d.violation("CQ %d resized to a ring whose CQE %d is not marked INVALID", q.cqn, i)
			break
		}
	}
	copy(out, abi.Bytes(&r))
	return nil
}

func (u *ufile) destroyCQ(h uint32, r *abi.IbUverbsDestroyCqResp) error {
	q, ok := u.ctx.objs[h].(*mcq)
	if !ok {
		return unix.EINVAL
	}
	if q.users > 0 {
		return unix.EBUSY
	}
	// An arm doorbell written before the destroy reached the device
	// first: take it now, as hardware would have, not as a doorbell for
	// a CQ that no longer exists.
	if q.uar != nil {
		u.d.serviceArmRegister(q.uar)
	}
	delete(u.ctx.objs, h)
	delete(u.d.cqs, q.cqn)
	q.pins.release()
	r.CompEventsReported = q.events
	return nil
}

func (u *ufile) cmdDestroyCQ(in, out, din, dout []byte) error {
	var req abi.IbUverbsDestroyCq
	copy(abi.Bytes(&req), in)
	var r abi.IbUverbsDestroyCqResp
	if err := u.destroyCQ(req.CqHandle, &r); err != nil {
		return err
	}
	copy(out, abi.Bytes(&r))
	return nil
}

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
	pd, ok1 := ctx.objs[a.pd].(*mpd)
	scq, ok2 := ctx.objs[a.scq].(*mcq)
	rcq, ok3 := ctx.objs[a.rcq].(*mcq)
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
	if a.typ != qptRC && a.typ != qptUC && a.typ != qptUD {
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
	if srq != nil && rq != 0 || req.BufAddr == 0 || req.DbAddr == 0 || req.DbAddr%8 != 0 {
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
	rcq.users++
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
	q, ok := u.ctx.objs[h].(*mqp)
	if !ok {
		return unix.EINVAL
	}
	delete(u.ctx.objs, h)
	delete(u.d.qps, q.qpn)
	q.pins.release()
	q.pd.users--
	q.scq.users--
	q.rcq.users--
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
	q, ok := u.ctx.objs[m.QpHandle].(*mqp)
	if !ok {
		return unix.EINVAL
	}
	mask := m.AttrMask
	if mask&^maskLegacy != 0 {
		return unix.EINVAL
	}
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
			q.rnrTries = 0
		case prev == qpsReset && next == qpsInit:
			if ne.Uint64(q.db) != 0 {
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
	return u.modifyQP(&req.Base, true)
}

func (u *ufile) cmdQueryQP(in, out, din, dout []byte) error {
	var req abi.IbUverbsQueryQp
	copy(abi.Bytes(&req), in)
	q, ok := u.ctx.objs[req.QpHandle].(*mqp)
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
