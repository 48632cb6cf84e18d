package uverbs

import (
	"fmt"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// XRC: the extended reliable connected transport. An XRC domain (XRCD,
// xrcd.go) holds XRC SRQs and XRC target QPs; an initiator QP (a PD's, with
// a send queue only) connects to a target QP and names, in each send, the
// XRC SRQ the message lands in (SendWR.RemoteSRQN); the SRQ's CQ reports
// it. Processes that open the same domain (through one file) share its
// target QPs: XRCD.OpenQP. Only devices with DeviceXRC have it (mlx5 among
// goverbs' providers; rxe and siw do not).

// SRQType is a shared receive queue's type (enum ibv_srq_type).
type SRQType uint8

// SRQ types.
const (
	SRQTypeBasic SRQType = 0 // IBV_SRQT_BASIC: CreateSRQ's
	SRQTypeXRC   SRQType = 1 // IBV_SRQT_XRC: in an XRC domain, with its own CQ
)

// String is "BASIC", "XRC", or "SRQType(N)".
func (t SRQType) String() string {
	switch t {
	case SRQTypeBasic:
		return "BASIC"
	case SRQTypeXRC:
		return "XRC"
	}
	return fmt.Sprintf("SRQType(%d)", uint8(t))
}

// SRQInitEx is what CreateSRQEx creates (struct ibv_srq_init_attr_ex).
type SRQInitEx struct {
	Type SRQType
	SRQInit
	// XRCD and CQ (SRQTypeXRC): the domain the SRQ belongs to, and the
	// CQ its receives complete on.
	XRCD *XRCD
	CQ   *CQ
}

// CreateSRQEx creates a shared receive queue of any type
// (ibv_create_srq_ex): SRQTypeBasic is CreateSRQ; SRQTypeXRC runs the
// ioctl SRQ_CREATE method, or the CREATE_XSRQ write command where the
// kernel has no such method (one syscall after the capability check), and
// is refused with ErrNotSupported on a device without DeviceXRC. A tag-matching SRQ
// (IBV_SRQT_TM) is not offered.
func (pd *PD) CreateSRQEx(init SRQInitEx) (_ *SRQ, err error) {
	const verb = "CreateSRQEx"
	c := pd.ctx
	dev := c.dev.Name
	switch init.Type {
	case SRQTypeBasic:
		if init.XRCD != nil || init.CQ != nil {
			return nil, argError(verb, dev, "a basic SRQ has no XRC domain or CQ")
		}
		return pd.CreateSRQ(init.SRQInit)
	case SRQTypeXRC:
	default:
		return nil, argError(verb, dev, "SRQ type %v", init.Type)
	}
	if sp := c.begin(verb); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	if err := c.xrcSupported(verb); err != nil {
		return nil, err
	}
	switch {
	case init.MaxWR == 0 || init.MaxSGE == 0:
		return nil, argError(verb, dev, "max_wr %d, max_sge %d: both must be at least 1", init.MaxWR, init.MaxSGE)
	case init.XRCD == nil || init.CQ == nil:
		return nil, argError(verb, dev, "an XRC SRQ needs an XRC domain and a CQ")
	case init.XRCD.ctx != c || init.CQ.ctx != c:
		return nil, argError(verb, dev, "the XRC domain and the CQ must belong to the PD's context")
	}
	for _, o := range []struct {
		l    *lifetime
		what string
	}{{&pd.lifetime, "PD"}, {&init.XRCD.lifetime, "XRC domain"}, {&init.CQ.lifetime, "CQ"}} {
		if err := o.l.use(verb, dev); err != nil {
			return nil, &OpError{Verb: verb, Device: dev, Err: fmt.Errorf("the %s: %w", o.what, ErrClosed)}
		}
		defer o.l.done()
	}
	setup, err := c.prov.CreateSRQ(provider.SRQAttr{MaxWR: init.MaxWR, MaxSGE: init.MaxSGE, Limit: init.Limit, XRC: true})
	if err != nil {
		return nil, opError(verb, dev, abi.TransportNone, err)
	}
	in, out := setup.Udata()
	tag := c.srqs.reserve()
	defer c.srqs.abandon(tag, &err) // a failed create frees the slot
	var resp abi.IbUverbsCreateSrqResp
	b := abi.NewIoctl(abi.UVERBS_OBJECT_SRQ, abi.UVERBS_METHOD_SRQ_CREATE)
	defer b.Release()
	h := b.NewObject(abi.UVERBS_ATTR_CREATE_SRQ_HANDLE)
	b.Handle(abi.UVERBS_ATTR_CREATE_SRQ_PD_HANDLE, pd.handle)
	b.Uint64In(abi.UVERBS_ATTR_CREATE_SRQ_TYPE, abi.IB_UVERBS_SRQT_XRC)
	b.Uint64In(abi.UVERBS_ATTR_CREATE_SRQ_USER_HANDLE, tag)
	b.Uint32In(abi.UVERBS_ATTR_CREATE_SRQ_MAX_WR, init.MaxWR)
	b.Uint32In(abi.UVERBS_ATTR_CREATE_SRQ_MAX_SGE, init.MaxSGE)
	b.Uint32In(abi.UVERBS_ATTR_CREATE_SRQ_LIMIT, init.Limit)
	b.Handle(abi.UVERBS_ATTR_CREATE_SRQ_XRCD_HANDLE, init.XRCD.handle)
	b.Handle(abi.UVERBS_ATTR_CREATE_SRQ_CQ_HANDLE, init.CQ.handle)
	wrA := b.PtrOutLen(abi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR, 4)
	sgeA := b.PtrOutLen(abi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE, 4)
	numA := b.PtrOutLen(abi.UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM, 4)
	b.UHW(in, out)
	tr, err := c.ioctl(verb, b, func() error {
		req := abi.IbUverbsCreateXsrq{UserHandle: tag, SrqType: abi.IB_UVERBS_SRQT_XRC, PdHandle: pd.handle, MaxWr: init.MaxWR,
			MaxSge: init.MaxSGE, SrqLimit: init.Limit, XrcdHandle: init.XRCD.handle, CqHandle: init.CQ.handle}
		cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_CREATE_XSRQ, In: abi.Bytes(&req), Out: abi.Bytes(&resp), DriverIn: in, DriverOut: out}
		return c.fallback(verb, &cmd)
	})
	if err != nil {
		setup.Abort()
		return nil, err
	}
	if tr == abi.TransportIoctl {
		resp = abi.IbUverbsCreateSrqResp{SrqHandle: uint32(b.Result(h)), MaxWr: ne.Uint32(b.Output(wrA)),
			MaxSge: ne.Uint32(b.Output(sgeA)), Srqn: ne.Uint32(b.Output(numA))}
	}
	srq := &SRQ{pd: pd, handle: resp.SrqHandle, srqn: resp.Srqn, maxWR: resp.MaxWr, maxSGE: resp.MaxSge, tag: tag, xrc: true}
	prov, err := setup.Complete(provider.SRQCreated{Handle: resp.SrqHandle, MaxWR: resp.MaxWr, MaxSGE: resp.MaxSge, SRQN: resp.Srqn})
	if err != nil {
		srq.destroyKernel()
		return nil, opError(verb, dev, abi.TransportNone, err)
	}
	srq.prov = prov
	c.srqs.set(tag, srq)
	return srq, nil
}

// Type is the SRQ's type.
func (srq *SRQ) Type() SRQType {
	if srq.xrc {
		return SRQTypeXRC
	}
	return SRQTypeBasic
}

// xrcSupported is XRC's capability check: ErrNotSupported on a device
// without DeviceXRC.
func (c *Context) xrcSupported(verb string) error {
	if c.skipCapChecks {
		return nil
	}
	a, err := c.capabilities()
	if err != nil {
		return err
	}
	if a.CapFlags&DeviceXRC == 0 {
		return opError(verb, c.dev.Name, abi.TransportNone,
			fmt.Errorf("%w: the device has no XRC (no XRC in its capability flags)", ErrNotSupported))
	}
	return nil
}

// createXRCIni is CreateQP of an XRC initiator: a send queue and its CQ,
// no receive side (the ioctl QP_CREATE method, or the CREATE_QP write
// command, with IB_QPT_XRC_INI, after the capability check).
func (pd *PD) createXRCIni(init QPInit) (_ *QP, err error) {
	const verb = "CreateQP"
	c := pd.ctx
	dev := c.dev.Name
	if sp := c.begin(verb); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	if err := c.xrcSupported(verb); err != nil {
		return nil, err
	}
	switch {
	case init.SendCQ == nil:
		return nil, argError(verb, dev, "an XRC initiator needs a send CQ")
	case init.RecvCQ != nil || init.SRQ != nil || init.Cap.MaxRecvWR != 0 || init.Cap.MaxRecvSGE != 0:
		return nil, argError(verb, dev, "an XRC initiator has no receive side: no receive CQ, SRQ, MaxRecvWR or MaxRecvSGE")
	case init.SendCQ.ctx != c:
		return nil, argError(verb, dev, "the send CQ must belong to the PD's context")
	case init.SingleThreaded && !init.SendCQ.single:
		return nil, argError(verb, dev, "a single-threaded QP needs a single-threaded send CQ (CQOptions.SingleThreaded)")
	}
	for _, l := range []*lifetime{&pd.lifetime, &init.SendCQ.lifetime} {
		if err := l.use(verb, dev); err != nil {
			return nil, err
		}
		defer l.done()
	}
	setup, err := c.prov.CreateQP(provider.QPAttr{Type: QPTypeXRCIni, Cap: init.Cap, SendCQ: init.SendCQ.prov, SignalAll: init.SignalAll,
		SingleThreaded: init.SingleThreaded})
	if err != nil {
		return nil, opError(verb, dev, abi.TransportNone, err)
	}
	in, out := setup.Udata()
	tag := c.qps.reserve()
	defer c.qps.abandon(tag, &err) // a failed create frees the slot
	capIn := abi.IbUverbsQpCap{MaxSendWr: init.Cap.MaxSendWR, MaxSendSge: init.Cap.MaxSendSGE, MaxInlineData: init.Cap.MaxInlineData}
	b := abi.NewIoctl(abi.UVERBS_OBJECT_QP, abi.UVERBS_METHOD_QP_CREATE)
	defer b.Release()
	// The ioctl method takes no receive CQ for an initiator (it would
	// ignore one).
	b.Handle(abi.UVERBS_ATTR_CREATE_QP_PD_HANDLE, pd.handle)
	b.Handle(abi.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, init.SendCQ.handle)
	var flags uint32
	if init.SignalAll {
		flags = abi.IB_UVERBS_QP_CREATE_SQ_SIG_ALL
	}
	resp, err := c.createQPIoctl(verb, b, tag, capIn, QPTypeXRCIni, flags, in, out, func(resp *abi.IbUverbsCreateQpResp) error {
		// The kernel ignores the receive CQ of an initiator; rdma-core
		// sends the send CQ's handle there too.
		req := abi.IbUverbsCreateQp{UserHandle: tag, PdHandle: pd.handle, SendCqHandle: init.SendCQ.handle, RecvCqHandle: init.SendCQ.handle,
			MaxSendWr: init.Cap.MaxSendWR, MaxSendSge: init.Cap.MaxSendSGE, MaxInlineData: init.Cap.MaxInlineData, QpType: uint8(QPTypeXRCIni)}
		if init.SignalAll {
			req.SqSigAll = 1
		}
		cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_CREATE_QP, In: abi.Bytes(&req), Out: abi.Bytes(resp), DriverIn: in, DriverOut: out}
		return c.fallback(verb, &cmd)
	})
	if err != nil {
		setup.Abort()
		return nil, err
	}
	init.Cap = QPCap{MaxSendWR: resp.MaxSendWr, MaxSendSGE: resp.MaxSendSge, MaxInlineData: resp.MaxInlineData}
	qp := &QP{pd: pd, handle: resp.QpHandle, qpn: resp.Qpn, init: init, tag: tag}
	prov, err := setup.Complete(provider.QPCreated{Handle: resp.QpHandle, QPN: resp.Qpn, Cap: init.Cap})
	if err != nil {
		qp.destroyKernel()
		return nil, opError(verb, dev, abi.TransportNone, err)
	}
	qp.setProvider(prov)
	c.qps.set(tag, qp)
	return qp, nil
}

// CreateTargetQP creates an XRC target QP in the domain (ibv_create_qp_ex
// with IBV_QPT_XRC_RECV: the ioctl QP_CREATE method naming the domain, or
// the CREATE_QP write command naming it where a PD would go; one syscall
// after the capability check). It has no queues and no CQs: what arrives
// for it goes to the XRC SRQ each send names. Connect it like an RC QP (to
// the initiator); PostSend and PostRecv on it fail. Other processes that
// opened the same domain reach it with OpenQP.
func (x *XRCD) CreateTargetQP() (_ *QP, err error) {
	const verb = "CreateQP"
	c := x.ctx
	if sp := c.begin(verb); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	if err := c.xrcSupported(verb); err != nil {
		return nil, err
	}
	if err := x.use(verb, c.dev.Name); err != nil {
		return nil, err
	}
	defer x.done()
	tag := c.qps.reserve()
	defer c.qps.abandon(tag, &err) // a failed create frees the slot
	// The kernel creates the QP itself (no driver data: ib_create_qp).
	// The ioctl method names the domain in its own attribute, and no PD
	// or CQ; the write command puts the domain where the PD goes.
	b := abi.NewIoctl(abi.UVERBS_OBJECT_QP, abi.UVERBS_METHOD_QP_CREATE)
	defer b.Release()
	b.Handle(abi.UVERBS_ATTR_CREATE_QP_XRCD_HANDLE, x.handle)
	resp, err := c.createQPIoctl(verb, b, tag, abi.IbUverbsQpCap{}, QPTypeXRCTgt, 0, nil, nil, func(resp *abi.IbUverbsCreateQpResp) error {
		req := abi.IbUverbsCreateQp{UserHandle: tag, PdHandle: x.handle, QpType: uint8(QPTypeXRCTgt)}
		cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_CREATE_QP, In: abi.Bytes(&req), Out: abi.Bytes(resp)}
		return c.fallback(verb, &cmd)
	})
	if err != nil {
		return nil, err
	}
	return x.targetQP(resp.QpHandle, resp.Qpn, tag), nil
}

// createQPIoctl runs UVERBS_METHOD_QP_CREATE for an XRC QP: b already
// names the objects (the PD and send CQ of an initiator, the domain of a
// target); this adds the new QP's handle, the user handle, the capacities,
// the type, the flags, the outputs and the driver data, and falls back to
// write (which fills the response) where the kernel has no such method.
// The answer is the write command's response either way.
func (c *Context) createQPIoctl(verb string, b *abi.Ioctl, tag uint64, capIn abi.IbUverbsQpCap, typ QPType, flags uint32, in, out []byte,
	write func(*abi.IbUverbsCreateQpResp) error) (abi.IbUverbsCreateQpResp, error) {
	var resp abi.IbUverbsCreateQpResp
	h := b.NewObject(abi.UVERBS_ATTR_CREATE_QP_HANDLE)
	b.Uint64In(abi.UVERBS_ATTR_CREATE_QP_USER_HANDLE, tag)
	b.PtrIn(abi.UVERBS_ATTR_CREATE_QP_CAP, abi.Bytes(&capIn))
	b.Uint64In(abi.UVERBS_ATTR_CREATE_QP_TYPE, uint64(typ))
	if flags != 0 {
		b.Uint32In(abi.UVERBS_ATTR_CREATE_QP_FLAGS, flags)
	}
	var capOut abi.IbUverbsQpCap
	capA := b.PtrOutLen(abi.UVERBS_ATTR_CREATE_QP_RESP_CAP, len(abi.Bytes(&capOut)))
	qpnA := b.PtrOutLen(abi.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, 4)
	if in != nil || out != nil {
		b.UHW(in, out)
	}
	tr, err := c.ioctl(verb, b, func() error { return write(&resp) })
	if err != nil || tr != abi.TransportIoctl {
		return resp, err
	}
	copy(abi.Bytes(&capOut), b.Output(capA))
	return abi.IbUverbsCreateQpResp{QpHandle: uint32(b.Result(h)), Qpn: ne.Uint32(b.Output(qpnA)), MaxSendWr: capOut.MaxSendWr,
		MaxRecvWr: capOut.MaxRecvWr, MaxSendSge: capOut.MaxSendSge, MaxRecvSge: capOut.MaxRecvSge, MaxInlineData: capOut.MaxInlineData}, nil
}

// OpenQP opens the XRC target QP number qpn of the domain, created by
// another context (another process) that opened the same domain
// (ibv_open_qp: OPEN_QP, one syscall after the capability check). The QP
// returned is this context's handle to it: Modify, Query and Close (which
// closes this handle; the QP lives on until its creator and every opener
// closed it).
func (x *XRCD) OpenQP(qpn uint32) (_ *QP, err error) {
	const verb = "OpenQP"
	c := x.ctx
	if sp := c.begin(verb); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	if err := c.xrcSupported(verb); err != nil {
		return nil, err
	}
	if qpn == 0 || qpn > psnMask {
		return nil, argError(verb, c.dev.Name, "QP number %d", qpn)
	}
	if err := x.use(verb, c.dev.Name); err != nil {
		return nil, err
	}
	defer x.done()
	tag := c.qps.reserve()
	defer c.qps.abandon(tag, &err) // a failed create frees the slot
	req := abi.IbUverbsOpenQp{UserHandle: tag, PdHandle: x.handle, Qpn: qpn, QpType: uint8(QPTypeXRCTgt)}
	var resp abi.IbUverbsCreateQpResp
	cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_OPEN_QP, In: abi.Bytes(&req), Out: abi.Bytes(&resp)}
	if err := c.invoke(verb, &cmd); err != nil {
		return nil, err
	}
	return x.targetQP(resp.QpHandle, resp.Qpn, tag), nil
}

// targetQP wraps a target QP's handle. Its PD is a stand-in carrying the
// context (QP.PD reports none).
func (x *XRCD) targetQP(handle, qpn uint32, tag uint64) *QP {
	var prov provider.QP = targetQueues{}
	if m, ok := x.ctx.prov.(provider.TargetQPMaker); ok {
		prov = m.TargetQP(qpn) // mlx5: the target's ECE and data-in-order query
	}
	qp := &QP{pd: &PD{ctx: x.ctx}, handle: handle, qpn: qpn, init: QPInit{Type: QPTypeXRCTgt}, tag: tag}
	qp.setProvider(prov)
	x.ctx.qps.set(tag, qp)
	return qp
}

// targetQueues is the provider side of an XRC target QP whose provider
// keeps none.
type targetQueues struct{}

var errTargetPost = fmt.Errorf("%w: an XRC target QP has no queues (receives go to the XRC SRQ the sender names)", provider.ErrNotSupported)

func (targetQueues) PostSend(wrs []provider.SendWR) (int, error) {
	return 0, &provider.WRError{Verb: "PostSend", Err: errTargetPost}
}
func (targetQueues) PostRecv(wrs []provider.RecvWR) (int, error) {
	return 0, &provider.WRError{Verb: "PostRecv", Err: errTargetPost}
}
func (targetQueues) Modified(provider.QPState) {}
func (targetQueues) Close() error              { return nil }
