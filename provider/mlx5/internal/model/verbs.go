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
	if d.methods == nil {
		d.methods = map[[2]uint16]int{}
	}
	d.methods[[2]uint16{c.object, c.method}]++
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
		f, _ := c.u64(abi.UVERBS_ATTR_CREATE_CQ_FLAGS)
		if f&^cqCreateFlags != 0 {
			return unix.EOPNOTSUPP
		}
		din, _ := c.in(attrUHWIn)
		dout, _ := c.out(attrUHWOut)
		q, err := u.createCQ(uh, uint32(cqe), int(ch), din, dout, f)
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
		if c.find(abi.UVERBS_ATTR_CREATE_QP_IND_TABLE_HANDLE) != nil {
			return unix.EOPNOTSUPP
		}
		a.userHandle, _ = c.u64(abi.UVERBS_ATTR_CREATE_QP_USER_HANDLE)
		capIn, ok := c.in(abi.UVERBS_ATTR_CREATE_QP_CAP)
		if !ok || len(capIn) != size[abi.IbUverbsQpCap]() {
			return unix.EINVAL
		}
		copy(abi.Bytes(&a.cap), capIn)
		t, ok := c.u64(abi.UVERBS_ATTR_CREATE_QP_TYPE)
		if !ok {
			return unix.EINVAL // a mandatory attribute
		}
		a.typ = uint8(t)
		// The kernel's UVERBS_METHOD_QP_CREATE handler: a target names
		// its domain and nothing else; no other type names a domain, and
		// an initiator no SRQ.
		hasXRCD := c.find(abi.UVERBS_ATTR_CREATE_QP_XRCD_HANDLE) != nil
		switch a.typ {
		case qptXRCTgt:
			if c.find(abi.UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE) != nil || c.find(abi.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE) != nil ||
				c.find(abi.UVERBS_ATTR_CREATE_QP_PD_HANDLE) != nil {
				return unix.EINVAL
			}
			if !hasXRCD {
				return unix.ENOENT // uverbs_attr_get_uobject of an absent attribute
			}
			a.pd = handleOf(c, abi.UVERBS_ATTR_CREATE_QP_XRCD_HANDLE) // createTgtQP's domain
		case qptRC, qptUC, qptUD, qptXRCIni:
			if hasXRCD || a.hasSRQ && a.typ == qptXRCIni {
				return unix.EINVAL
			}
			if c.find(abi.UVERBS_ATTR_CREATE_QP_PD_HANDLE) == nil || c.find(abi.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE) == nil ||
				a.typ != qptXRCIni && c.find(abi.UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE) == nil {
				return unix.ENOENT // uverbs_attr_get_obj of an absent attribute
			}
		default:
			return unix.EINVAL
		}
		if a.hasSRQ {
			// An XRC SRQ feeds XRC targets only, and the reverse.
			if s, ok := u.ctx.objs[a.srq].(*msrq); ok && (s.xrcd != nil) != (a.typ == qptXRCTgt) {
				return unix.EINVAL
			}
		}
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
	case om{abi.UVERBS_OBJECT_SRQ, abi.UVERBS_METHOD_SRQ_CREATE}:
		return u.ioctlCreateSRQ(c) // xrc.go
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
	case om{abi.UVERBS_OBJECT_MR, abi.UVERBS_METHOD_ADVISE_MR}:
		return u.ioctlAdviseMR(c) // advise.go
	case om{abi.UVERBS_OBJECT_MR, abi.UVERBS_METHOD_MR_DESTROY}:
		return u.deregMR(handleOf(c, 0))
	case om{abi.UVERBS_OBJECT_XRCD, abi.UVERBS_METHOD_XRCD_DESTROY}:
		return u.closeXRCD(handleOf(c, 0))
	case om{abi.UVERBS_OBJECT_MW, abi.UVERBS_METHOD_MW_DESTROY}:
		return u.deallocMW(handleOf(c, 0))
	case om{abi.UVERBS_OBJECT_AH, abi.UVERBS_METHOD_AH_DESTROY}:
		return u.destroyAH(handleOf(c, 0))
	case om{abi.MLX5_IB_OBJECT_DEVX, abi.MLX5_IB_METHOD_DEVX_OTHER}:
		return u.ioctlDEVXOther(c) // devx.go
	case om{abi.MLX5_IB_OBJECT_DEVX_OBJ, abi.MLX5_IB_METHOD_DEVX_OBJ_QUERY}:
		return u.ioctlDEVXObjQuery(c)
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
	// The dump-fill mkey (the null MR's key) when the device has one and
	// the response reaches the field (mlx5_ib_alloc_ucontext).
	if o.ECE != 0 {
		resp.CompMask |= abi.MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_ECE
	}
	if !o.NoDumpFill && len(dout) >= size[abi.Mlx5IbAllocUcontextResp]() {
		resp.CompMask |= abi.MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_DUMP_FILL_MKEY
		resp.DumpFillMkey = dumpFillMkey
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

// capFlags are the device capability flags mlx5_ib reports that the model
// has: memory windows (type 1 and 2B) when the device has imaicl, XRC
// when it has xrc.
func (d *Device) capFlags() uint32 {
	var f uint32
	if !d.o.NoMemWindows {
		f |= devCapMemWindow | devCapMemWindow2B
	}
	if !d.o.NoXRC {
		f |= devCapXRC
	}
	return f
}

func (d *Device) deviceAttr() abi.IbUverbsQueryDeviceResp {
	r := abi.IbUverbsQueryDeviceResp{
		FwVer: 16<<32 | 35<<16 | 1000, MaxMrSize: ^uint64(0), PageSizeCap: ^uint64(0xfff),
		VendorId: vendorID, VendorPartId: vendorPartID, HwVer: 0, MaxQp: 1 << 18, MaxQpWr: maxQPWR,
		DeviceCapFlags: d.capFlags(), MaxSge: maxSGE, MaxSgeRd: maxSGE, MaxCq: 1 << 24, MaxCqe: maxCQE,
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
	// mlx5_ib_query_device: a 63-bit free-running clock at the device's
	// frequency (MLX5_CAP_GEN device_frequency_khz).
	r.TimestampMask, r.HcaCoreClock = 1<<63-1, clockKHz
	r.DeviceCapFlagsEx = uint64(u.d.capFlags())
	// MLX5_CAP_GEN(cq_moderation): MLX5_MAX_CQ_COUNT, MLX5_MAX_CQ_PERIOD.
	r.CqModerationCaps = abi.IbUverbsCqModerationCaps{MaxCqModerationCount: maxCQCount, MaxCqModerationPeriod: maxCQPeriod}
	r.OdpCaps = u.d.odpCaps()
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
