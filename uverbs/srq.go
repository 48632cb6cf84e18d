package uverbs

import (
	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// SRQInit is what a shared receive queue is created with.
type SRQInit struct {
	MaxWR, MaxSGE uint32
	// Limit arms the SRQ limit event: when fewer than Limit receives are
	// posted, an EventSRQLimitReached async event fires (0: off).
	Limit uint32
}

// SRQ is a shared receive queue: receives posted to it feed every QP
// created with it.
//
// Modify, Query and the getters are safe for concurrent use. Close waits
// for the slow verbs in flight, then destroys the SRQ; after it (or after
// the Context closed) every verb returns an error for which
// errors.Is(err, ErrClosed) holds, and the SRQ's handle never reaches the
// kernel again. Close is idempotent.
type SRQ struct {
	pd     *PD
	prov   provider.SRQ
	handle uint32
	srqn   uint32
	maxWR  uint32
	maxSGE uint32
	tag    uint64
	xrc    bool // SRQTypeXRC (xrc.go)
	lifetime
}

// CreateSRQ creates a shared receive queue (CREATE_SRQ: one syscall).
func (pd *PD) CreateSRQ(init SRQInit) (_ *SRQ, err error) {
	if sp := pd.ctx.begin("CreateSRQ"); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	c := pd.ctx
	dev := c.dev.Name
	if init.MaxWR == 0 || init.MaxSGE == 0 {
		return nil, argError("CreateSRQ", dev, "max_wr %d, max_sge %d: both must be at least 1", init.MaxWR, init.MaxSGE)
	}
	if err := pd.use("CreateSRQ", dev); err != nil {
		return nil, err
	}
	defer pd.done()
	setup, err := c.prov.CreateSRQ(provider.SRQAttr{MaxWR: init.MaxWR, MaxSGE: init.MaxSGE, Limit: init.Limit})
	if err != nil {
		return nil, opError("CreateSRQ", dev, abi.TransportNone, err)
	}
	in, out := setup.Udata()
	tag := c.srqs.reserve()
	defer c.srqs.abandon(tag, &err) // a failed create frees the slot
	req := abi.IbUverbsCreateSrq{UserHandle: tag, PdHandle: pd.handle, MaxWr: init.MaxWR, MaxSge: init.MaxSGE, SrqLimit: init.Limit}
	var resp abi.IbUverbsCreateSrqResp
	cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_CREATE_SRQ, In: abi.Bytes(&req), Out: abi.Bytes(&resp), DriverIn: in, DriverOut: out, Quick: c.cpuOnly}
	if err := c.invoke("CreateSRQ", &cmd); err != nil {
		setup.Abort()
		return nil, err
	}
	srq := &SRQ{pd: pd, handle: resp.SrqHandle, srqn: resp.Srqn, maxWR: resp.MaxWr, maxSGE: resp.MaxSge, tag: tag}
	prov, err := setup.Complete(provider.SRQCreated{Handle: resp.SrqHandle, MaxWR: resp.MaxWr, MaxSGE: resp.MaxSge, SRQN: resp.Srqn})
	if err != nil {
		srq.destroyKernel()
		return nil, opError("CreateSRQ", dev, abi.TransportNone, err)
	}
	srq.prov = prov
	c.srqs.set(tag, srq)
	return srq, nil
}

// Handle is the kernel's handle for the SRQ.
func (srq *SRQ) Handle() uint32 { return srq.handle }

// SRQN is the SRQ number (XRC peers address it by it).
func (srq *SRQ) SRQN() uint32 { return srq.srqn }

// MaxWR and MaxSGE are the SRQ's capacities as the kernel sized them.
func (srq *SRQ) MaxWR() uint32 { return srq.maxWR }

// MaxSGE is the most SGEs a receive on the SRQ may have.
func (srq *SRQ) MaxSGE() uint32 { return srq.maxSGE }

// PostRecv posts receive work requests to the SRQ (no syscall).
func (srq *SRQ) PostRecv(wrs []RecvWR) (int, error) {
	if srq.gone.Load() {
		return 0, errPostSRQRecvClosed
	}
	w := recvsNoEscape(wrs) // the caller's requests may stay on its stack
	c := srq.pd.ctx
	if c.rec.Load() == nil {
		return srq.prov.PostRecv(w)
	}
	sp := c.begin("PostSRQRecv")
	n, err := srq.prov.PostRecv(w)
	sp.end(err)
	return n, err
}

// SRQAttrMask says what ModifySRQ changes.
type SRQAttrMask uint32

// SRQ attribute mask bits (enum ibv_srq_attr_mask).
const (
	SRQAttrMaxWR SRQAttrMask = 1 << 0 // resize
	SRQAttrLimit SRQAttrMask = 1 << 1 // arm the limit event
)

// modify is Modify (srq_options.go).
func (srq *SRQ) modify(maxWR, limit uint32, mask SRQAttrMask) (err error) {
	if sp := srq.pd.ctx.begin("ModifySRQ"); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	c := srq.pd.ctx
	if mask == 0 || mask&^(SRQAttrMaxWR|SRQAttrLimit) != 0 {
		return argError("ModifySRQ", c.dev.Name, "attribute mask %#x", uint32(mask))
	}
	if err := srq.use("ModifySRQ", c.dev.Name); err != nil {
		return err
	}
	defer srq.done()
	req := abi.IbUverbsModifySrq{SrqHandle: srq.handle, AttrMask: uint32(mask), MaxWr: maxWR, SrqLimit: limit}
	in, out := c.prov.Udata(provider.VerbModifySRQ)
	cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_MODIFY_SRQ, In: abi.Bytes(&req), DriverIn: in, DriverOut: out}
	return c.invoke("ModifySRQ", &cmd)
}

// query is Query (srq_options.go).
func (srq *SRQ) query() (maxWR, maxSGE, limit uint32, err error) {
	if sp := srq.pd.ctx.begin("QuerySRQ"); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	if err := srq.use("QuerySRQ", srq.pd.ctx.dev.Name); err != nil {
		return 0, 0, 0, err
	}
	defer srq.done()
	req := abi.IbUverbsQuerySrq{SrqHandle: srq.handle}
	var resp abi.IbUverbsQuerySrqResp
	cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_QUERY_SRQ, In: abi.Bytes(&req), Out: abi.Bytes(&resp)}
	if err := srq.pd.ctx.invoke("QuerySRQ", &cmd); err != nil {
		return 0, 0, 0, err
	}
	return resp.MaxWr, resp.MaxSge, resp.SrqLimit, nil
}

// errPostSRQRecvClosed is PostRecv's error on a closed SRQ (preallocated).
var errPostSRQRecvClosed error = &OpError{Verb: "PostSRQRecv", Err: ErrClosed}

func (srq *SRQ) destroyKernel() error {
	req := abi.IbUverbsDestroySrq{SrqHandle: srq.handle}
	var resp abi.IbUverbsDestroySrqResp
	return srq.pd.ctx.destroyObject("DestroySRQ", abi.UVERBS_OBJECT_SRQ, abi.UVERBS_METHOD_SRQ_DESTROY, srq.handle,
		abi.UVERBS_ATTR_DESTROY_SRQ_RESP, abi.Bytes(&resp),
		&abi.Command{Num: abi.IB_USER_VERBS_CMD_DESTROY_SRQ, In: abi.Bytes(&req), Out: abi.Bytes(&resp), Quick: srq.pd.ctx.cpuOnly})
}

// Close destroys the SRQ (EBUSY while a QP uses it). Idempotent.
func (srq *SRQ) Close() error {
	// The span starts inside close: a Close after success is a no-op, not a call.
	return srq.close(func() (err error) {
		if sp := srq.pd.ctx.begin("DestroySRQ"); sp.rec != nil {
			defer func() { sp.end(err) }()
		}
		if err := srq.destroyKernel(); err != nil {
			return err
		}
		srq.pd.ctx.srqs.remove(srq.tag)
		return srq.prov.Close()
	})
}

// releaseProvider destroys the kernel object and frees the provider's
// memory when the context closes with the object still open. A failed
// destroy is not fatal: closing the file destroys the object.
func (srq *SRQ) releaseProvider() error {
	return srq.close(func() error {
		srq.destroyKernel()
		srq.pd.ctx.srqs.remove(srq.tag)
		return srq.prov.Close()
	})
}
