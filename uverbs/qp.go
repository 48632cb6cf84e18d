package uverbs

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// QPInit is what a queue pair is created with (struct ibv_qp_init_attr).
type QPInit struct {
	Type   QPType
	SendCQ *CQ
	RecvCQ *CQ
	// SRQ, if set, feeds the QP's receives; Cap.MaxRecvWR/SGE are then 0.
	SRQ       *SRQ
	Cap       QPCap
	SignalAll bool // every send completes, whatever its Signaled flag
	// SingleThreaded promises that the program orders every call on the
	// QP (PostSend, PostRecv, StartWR batches, Modify, Close) and on its
	// CQs as one goroutine's calls would be ordered (rdma-core's thread
	// domain); its CQs must be created with CQOptions.SingleThreaded
	// (CreateQP refuses others). A provider may then post without a lock:
	// mlx5's PostSend and PostRecv make no locked instruction (its post
	// and poll pair: docs/COST.md), nor do rxe's and siw's on amd64 (their
	// queues' locks are off; an SRQ keeps its own) but for the one
	// exchange of siw's send entry, which its doorbell rule needs. When
	// the device goes away, a post in progress on such a QP is not waited
	// for. A QP without it may complete to a single-threaded CQ.
	SingleThreaded bool
}

// QP is a queue pair. PostSend and PostRecv are the provider's fast path;
// see the provider's documentation for its thread safety and doorbell cost.
//
// Modify, Query and the getters are safe for concurrent use (Modify calls
// on one QP run one at a time). Close waits for the slow verbs in flight,
// then destroys the QP; after it (or after the Context closed) every verb
// returns an error for which errors.Is(err, ErrClosed) holds — PostSend and
// PostRecv too, as the provider reports it — and the QP's handle never
// reaches the kernel again. Close is idempotent.
type QP struct {
	pd     *PD
	prov   provider.QP
	ece    provider.ECEQP // prov as an ECEQP, if it is one (asserted once: ~80 instructions a Modify)
	handle uint32
	qpn    uint32
	init   QPInit
	tag    uint64
	modify sync.Mutex    // one Modify at a time: the state follows the kernel's order
	state  atomic.Uint32 // QPState after the last successful Modify
	lifetime

	batch WRBatch // StartWR's builder (one at a time)
}

// CreateQP creates a queue pair (the ioctl QP_CREATE method, or the
// CREATE_QP write command: one syscall). init.Cap is updated to what the
// kernel allocated and is readable with Cap.
func (pd *PD) CreateQP(init QPInit) (_ *QP, err error) {
	if init.Type == QPTypeXRCIni {
		return pd.createXRCIni(init) // xrc.go
	}
	if sp := pd.ctx.begin("CreateQP"); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	dev := pd.ctx.dev.Name
	if err := pd.checkQPInit(&init); err != nil {
		return nil, err
	}
	// Every handle that goes into the command is held open until it returns.
	held, err := holdQPHandles(pd, &init, dev)
	if err != nil {
		return nil, err
	}
	defer held.done()
	return pd.createQP(init)
}

// checkQPInit is CreateQP's check of init against its type and the PD's
// context.
func (pd *PD) checkQPInit(init *QPInit) error {
	c := pd.ctx
	dev := c.dev.Name
	switch {
	case init.Type == QPTypeXRCTgt:
		return argError("CreateQP", dev, "an XRC target QP belongs to an XRC domain: XRCD.CreateTargetQP")
	case init.Type != QPTypeRC && init.Type != QPTypeUC && init.Type != QPTypeUD:
		return argError("CreateQP", dev, "QP type %v", init.Type)
	case init.SendCQ == nil || init.RecvCQ == nil:
		return argError("CreateQP", dev, "a QP needs a send CQ and a receive CQ")
	case init.SendCQ.ctx != c || init.RecvCQ.ctx != c || (init.SRQ != nil && init.SRQ.pd.ctx != c):
		return argError("CreateQP", dev, "CQs and SRQ must belong to the PD's context")
	case init.SRQ != nil && init.SRQ.xrc:
		return argError("CreateQP", dev, "an XRC SRQ feeds XRC target QPs only (its senders name it)")
	case init.SRQ != nil && (init.Cap.MaxRecvWR != 0 || init.Cap.MaxRecvSGE != 0):
		return argError("CreateQP", dev, "a QP with an SRQ has no receive queue of its own: MaxRecvWR and MaxRecvSGE must be 0")
	case init.SingleThreaded && (!init.SendCQ.single || !init.RecvCQ.single):
		return argError("CreateQP", dev, "a single-threaded QP needs single-threaded CQs (CQOptions.SingleThreaded)")
	}
	return nil
}

// qpHandles are the objects a QP_CREATE names, held open (lifetime.use)
// for the command's duration; nil entries hold nothing.
type qpHandles [4]*lifetime

// holdQPHandles holds pd, init's CQs and its SRQ open, or releases what it
// took and says which was closed.
func holdQPHandles(pd *PD, init *QPInit, dev string) (qpHandles, error) {
	h := qpHandles{&pd.lifetime, &init.SendCQ.lifetime, &init.RecvCQ.lifetime, srqLifetime(init.SRQ)}
	for i, l := range h {
		if l == nil {
			continue
		}
		if err := l.use("CreateQP", dev); err != nil {
			// use took nothing; those after i are not taken yet.
			var taken qpHandles
			copy(taken[:i], h[:i])
			taken.done()
			what := [...]string{"PD", "send CQ", "receive CQ", "SRQ"}[i]
			return qpHandles{}, &OpError{Verb: "CreateQP", Device: dev, Err: fmt.Errorf("the %s: %w", what, ErrClosed)}
		}
	}
	return h, nil
}

// done releases the handles held.
func (h qpHandles) done() {
	for _, l := range h {
		if l != nil {
			l.done()
		}
	}
}

// createQP is CreateQP once its arguments are checked and its handles
// held. (Split from it, as createCQ from CreateCQ, so that the defers are
// open-coded: CreateQP's, deferred in a loop, went through the runtime's
// defer records.)
func (pd *PD) createQP(init QPInit) (_ *QP, err error) {
	c := pd.ctx
	dev := c.dev.Name
	pa := provider.QPAttr{Type: init.Type, Cap: init.Cap, SendCQ: init.SendCQ.prov, RecvCQ: init.RecvCQ.prov, SignalAll: init.SignalAll,
		SingleThreaded: init.SingleThreaded}
	if init.SRQ != nil {
		pa.SRQ = init.SRQ.prov
	}
	setup, err := c.prov.CreateQP(pa)
	if err != nil {
		return nil, opError("CreateQP", dev, abi.TransportNone, err)
	}
	in, out := setup.Udata()
	tag := c.qps.reserve()
	defer c.qps.abandon(tag, &err) // a failed create frees the slot
	r, err := pd.createQPCommand(&init, tag, in, out)
	if err != nil {
		setup.Abort()
		return nil, err
	}
	capOut := &r.cap
	init.Cap = QPCap{MaxSendWR: capOut.MaxSendWr, MaxRecvWR: capOut.MaxRecvWr, MaxSendSGE: capOut.MaxSendSge, MaxRecvSGE: capOut.MaxRecvSge, MaxInlineData: capOut.MaxInlineData}
	qp := &QP{pd: pd, handle: r.handle, qpn: r.qpn, init: init, tag: tag}
	prov, err := setup.Complete(provider.QPCreated{Handle: r.handle, QPN: qp.qpn, Cap: init.Cap})
	if err != nil {
		qp.destroyKernel()
		return nil, opError("CreateQP", dev, abi.TransportNone, err)
	}
	qp.setProvider(prov)
	c.qps.set(tag, qp)
	return qp, nil
}

// qpCapWire is q as QP_CREATE carries it.
func qpCapWire(q QPCap) abi.IbUverbsQpCap {
	return abi.IbUverbsQpCap{MaxSendWr: q.MaxSendWR, MaxRecvWr: q.MaxRecvWR, MaxSendSge: q.MaxSendSGE,
		MaxRecvSge: q.MaxRecvSGE, MaxInlineData: q.MaxInlineData}
}

// qpCreated is the kernel's answer to QP_CREATE.
type qpCreated struct {
	handle, qpn uint32
	cap         abi.IbUverbsQpCap
}

// createQPCommand sends QP_CREATE for init with user handle tag: by the
// flat path where it can (abi.File.FlatMethod), else by the builder
// (createQPBuilt).
func (pd *PD) createQPCommand(init *QPInit, tag uint64, in, out []byte) (r qpCreated, err error) {
	c := pd.ctx
	inline := [8]abi.FlatAttr{
		{ID: abi.UVERBS_ATTR_CREATE_QP_HANDLE}, // UVERBS_ACCESS_NEW: the kernel writes the handle here
		{ID: abi.UVERBS_ATTR_CREATE_QP_PD_HANDLE, Data: uint64(pd.handle)},
		{ID: abi.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, Data: uint64(init.SendCQ.handle)},
		{ID: abi.UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, Data: uint64(init.RecvCQ.handle)},
		{ID: abi.UVERBS_ATTR_CREATE_QP_USER_HANDLE, Len: 8, Data: tag},
		{ID: abi.UVERBS_ATTR_CREATE_QP_TYPE, Len: 8, Data: uint64(init.Type)},
	}
	ni := 6
	if init.SRQ != nil {
		inline[ni] = abi.FlatAttr{ID: abi.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, Data: uint64(init.SRQ.handle)}
		ni++
	}
	if init.SignalAll {
		inline[ni] = abi.FlatAttr{ID: abi.UVERBS_ATTR_CREATE_QP_FLAGS, Len: 4, Data: abi.IB_UVERBS_QP_CREATE_SQ_SIG_ALL}
		ni++
	}
	capIn := qpCapWire(init.Cap)
	var qpn [4]byte
	bufs := [5]abi.FlatBuf{
		{ID: abi.UVERBS_ATTR_CREATE_QP_CAP, B: abi.Bytes(&capIn)},
		{ID: abi.UVERBS_ATTR_CREATE_QP_RESP_CAP, Out: true, B: abi.Bytes(&r.cap)},
		{ID: abi.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, Out: true, B: qpn[:]},
	}
	nb := abi.FlatUHW(bufs[:], 3, in, out)
	done, _, err := c.flatMethod("CreateQP", abi.UVERBS_OBJECT_QP, abi.UVERBS_METHOD_QP_CREATE, c.cpuOnly, inline[:ni], bufs[:nb])
	if !done {
		return pd.createQPBuilt(init, tag, in, out)
	}
	if err != nil {
		return qpCreated{}, err
	}
	// Outputs the kernel did not write stay zero, as the builder's do.
	r.handle, r.qpn = uint32(inline[0].Data), ne.Uint32(qpn[:])
	return r, nil
}

// createQPBuilt is createQPCommand by the builder, with CREATE_QP by
// write where the kernel has no method.
func (pd *PD) createQPBuilt(init *QPInit, tag uint64, in, out []byte) (r qpCreated, err error) {
	c := pd.ctx
	capIn := qpCapWire(init.Cap)
	b := abi.NewIoctl(abi.UVERBS_OBJECT_QP, abi.UVERBS_METHOD_QP_CREATE)
	defer b.Release()
	if c.cpuOnly {
		b.Quick()
	}
	h := b.NewObject(abi.UVERBS_ATTR_CREATE_QP_HANDLE)
	b.Handle(abi.UVERBS_ATTR_CREATE_QP_PD_HANDLE, pd.handle)
	b.Handle(abi.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, init.SendCQ.handle)
	b.Handle(abi.UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, init.RecvCQ.handle)
	if init.SRQ != nil {
		b.Handle(abi.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, init.SRQ.handle)
	}
	b.Uint64In(abi.UVERBS_ATTR_CREATE_QP_USER_HANDLE, tag)
	b.PtrIn(abi.UVERBS_ATTR_CREATE_QP_CAP, abi.Bytes(&capIn))
	b.Uint64In(abi.UVERBS_ATTR_CREATE_QP_TYPE, uint64(init.Type))
	if init.SignalAll {
		b.Uint32In(abi.UVERBS_ATTR_CREATE_QP_FLAGS, abi.IB_UVERBS_QP_CREATE_SQ_SIG_ALL)
	}
	capA := b.PtrOutLen(abi.UVERBS_ATTR_CREATE_QP_RESP_CAP, len(abi.Bytes(&r.cap)))
	qpnA := b.PtrOutLen(abi.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, 4)
	b.UHW(in, out)
	tr, err := c.ioctl("CreateQP", b, func() error {
		req := abi.IbUverbsCreateQp{UserHandle: tag, PdHandle: pd.handle, SendCqHandle: init.SendCQ.handle, RecvCqHandle: init.RecvCQ.handle,
			MaxSendWr: capIn.MaxSendWr, MaxRecvWr: capIn.MaxRecvWr, MaxSendSge: capIn.MaxSendSge, MaxRecvSge: capIn.MaxRecvSge,
			MaxInlineData: capIn.MaxInlineData, QpType: uint8(init.Type)}
		if init.SignalAll {
			req.SqSigAll = 1
		}
		if init.SRQ != nil {
			req.SrqHandle, req.IsSrq = init.SRQ.handle, 1
		}
		var resp abi.IbUverbsCreateQpResp
		cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_CREATE_QP, In: abi.Bytes(&req), Out: abi.Bytes(&resp), DriverIn: in, DriverOut: out, Quick: c.cpuOnly}
		if err := c.fallback("CreateQP", &cmd); err != nil {
			return err
		}
		r.handle, r.qpn = resp.QpHandle, resp.Qpn
		r.cap = abi.IbUverbsQpCap{MaxSendWr: resp.MaxSendWr, MaxRecvWr: resp.MaxRecvWr, MaxSendSge: resp.MaxSendSge, MaxRecvSge: resp.MaxRecvSge, MaxInlineData: resp.MaxInlineData}
		return nil
	})
	if err != nil {
		return qpCreated{}, err
	}
	if tr == abi.TransportIoctl {
		r.handle = uint32(b.Result(h))
		copy(abi.Bytes(&r.cap), b.Output(capA))
		if v := b.Output(qpnA); len(v) == 4 {
			r.qpn = ne.Uint32(v)
		}
	}
	return r, nil
}

// QPN is the queue pair number peers address it by.
func (qp *QP) QPN() uint32 { return qp.qpn }

// Handle is the kernel's handle for the QP.
func (qp *QP) Handle() uint32 { return qp.handle }

// Type is the QP's transport service.
func (qp *QP) Type() QPType { return qp.init.Type }

// Cap is the QP's capacities as the kernel sized them.
func (qp *QP) Cap() QPCap { return qp.init.Cap }

// State is the QP's state after its last successful Modify (the device
// may have moved it to ERR since; Query asks the kernel).
func (qp *QP) State() QPState { return QPState(qp.state.Load()) }

// PD is the QP's protection domain (nil for an XRC target QP, which has
// none: its XRCD says where it belongs).
func (qp *QP) PD() *PD {
	if qp.init.Type == QPTypeXRCTgt {
		return nil
	}
	return qp.pd
}

// Modify changes the attributes named by mask (MODIFY_QP, or its extended
// form when mask has QPAttrRateLimit or SetECE queued options: one
// syscall).
func (qp *QP) Modify(attr *QPAttr, mask QPAttrMask) error {
	return qp.modifyQP(attr, mask, false)
}

// ModifyResolved is Modify for attributes whose address vector (AV) names
// a destination the kernel has just resolved: rdma_cm's (INIT_QP_ATTR
// after ResolveAddr found the peer's MAC), as package rdmacm uses it, the
// peer of an IP connection the program has just used (cmd/perftest's TCP
// exchange, when the GID is that peer's address), or the device's own GID
// (a loopback). On RoCE the kernel looks the MAC up again for every AV it
// is given (ib_resolve_eth_dmac), and waits for ARP when the neighbour is
// unknown, so Modify makes a command with an AV an ordinary syscall; here
// the neighbour is known and the kernel waits only for its address work
// queue, so on a software device (rxe, siw) the command is a raw syscall
// like Modify's others: the goroutine keeps its P while the kernel waits
// (microseconds; at most the kernel's 1 s resolution timeout, should the
// neighbour have gone in between). That keeps the runtime's monitor asleep: an
// ordinary syscall made while it sleeps (as it does while a dialer waits
// for the CM's answer) wakes it, and it then takes the CPU from a spinning
// goroutine every 20 µs, later every 10 ms with a preemption signal, until
// the program next parks (docs/COST.md, session 47).
func (qp *QP) ModifyResolved(attr *QPAttr, mask QPAttrMask) error {
	return qp.modifyQP(attr, mask, true)
}

func (qp *QP) modifyQP(attr *QPAttr, mask QPAttrMask, resolved bool) (err error) {
	if sp := qp.pd.ctx.begin("ModifyQP"); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	c := qp.pd.ctx
	if mask == 0 || mask&^(qpAttrLegacy|QPAttrRateLimit) != 0 {
		return argError("ModifyQP", c.dev.Name, "attribute mask %#x", uint32(mask))
	}
	if err := qp.use("ModifyQP", c.dev.Name); err != nil {
		return err
	}
	// Unlocked and released by hand below, not deferred: ModifyQP is one
	// of the cheapest commands (INIT, RTS), where two deferred calls were
	// ~50 of its ~1,000 user instructions; nothing between panics short of
	// a runtime fault.
	qp.modify.Lock()
	in, out := c.prov.Udata(provider.VerbModifyQP)
	// ECE options set on the QP go in this command's driver data, by the
	// extended command (ece.go).
	eq := qp.ece
	withECE := false
	if eq != nil {
		if ein, eout := eq.ModifyUdata(); ein != nil {
			in, out, withECE = ein, eout, true
		}
	}
	var cmd abi.Command
	if mask&QPAttrRateLimit != 0 || withECE {
		req := abi.IbUverbsExModifyQp{RateLimit: attr.RateLimit}
		attr.toModify(&req.Base, qp.handle, mask)
		req.Base.AttrMask = uint32(mask)
		var resp abi.IbUverbsExModifyQpResp
		cmd = abi.Command{Num: abi.IB_USER_VERBS_CMD_FLAG_EXTENDED | abi.IB_USER_VERBS_EX_CMD_MODIFY_QP, In: abi.Bytes(&req), Out: abi.Bytes(&resp), DriverIn: in, DriverOut: out}
	} else {
		var req abi.IbUverbsModifyQp
		attr.toModify(&req, qp.handle, mask)
		cmd = abi.Command{Num: abi.IB_USER_VERBS_CMD_MODIFY_QP, In: abi.Bytes(&req), DriverIn: in, DriverOut: out}
	}
	cmd.Quick = modifyIsQuick(c.cpuOnly, c.dev.Transport, mask, resolved)
	err = c.invoke("ModifyQP", &cmd)
	if withECE {
		eq.ModifyDone(err == nil)
	}
	if err == nil && mask&QPAttrState != 0 {
		qp.state.Store(uint32(attr.State))
		qp.prov.Modified(attr.State)
	}
	qp.modify.Unlock()
	qp.done()
	return err
}

// modifyIsQuick reports whether a MODIFY_QP with mask may be a raw syscall
// (abi.Command.Quick) on a device whose commands are CPU work (cpuOnly:
// rxe, siw). An address vector makes the kernel resolve the destination's
// MAC on RoCE, where it may wait for ARP: an ordinary syscall then, unless
// the caller knows the destination resolved (ModifyResolved). An iWARP
// device's AV is not RoCE's: the kernel resolves nothing for it
// (_ib_modify_qp resolves an RDMA_AH_ATTR_TYPE_ROCE AV only, and
// rdma_ah_find_type gives an iWARP port none), so siw's RTR stays quick
// (its ibvcost row was 1.18-1.19 of libsiw's in three boots as an ordinary
// syscall, against 1.10 for the other transitions: docs/COST.md, session 57).
func modifyIsQuick(cpuOnly bool, tr Transport, mask QPAttrMask, resolved bool) bool {
	return cpuOnly && (mask&QPAttrAV == 0 || resolved || tr == TransportIWARP)
}

// Query reads the attributes named by mask, and the QP's creation
// parameters, from the kernel (QUERY_QP: one syscall).
func (qp *QP) Query(mask QPAttrMask) (_ QPAttr, _ QPInit, err error) {
	if sp := qp.pd.ctx.begin("QueryQP"); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	c := qp.pd.ctx
	if err := qp.use("QueryQP", c.dev.Name); err != nil {
		return QPAttr{}, QPInit{}, err
	}
	defer qp.done()
	req := abi.IbUverbsQueryQp{QpHandle: qp.handle, AttrMask: uint32(mask)}
	var resp abi.IbUverbsQueryQpResp
	cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_QUERY_QP, In: abi.Bytes(&req), Out: abi.Bytes(&resp), Quick: c.cpuOnly}
	if err := c.invoke("QueryQP", &cmd); err != nil {
		return QPAttr{}, QPInit{}, err
	}
	var a QPAttr
	a.fromQuery(&resp)
	init := qp.init
	init.Cap = a.Cap
	init.SignalAll = a.SignalAllQueried
	return a, init, nil
}

// setProvider sets the QP's provider side, and its ECE form once (a type
// assertion per Modify cost ~80 instructions).
func (qp *QP) setProvider(p provider.QP) {
	qp.prov = p
	qp.ece, _ = p.(provider.ECEQP)
}

// PostSend posts send work requests; see provider.QP for the contract:
// every request is validated before any is posted. The requests are read
// during the call and not kept, so a composite literal will do
// (qp.PostSend([]SendWR{{...}})): it stays on the caller's stack, and the
// post allocates nothing.
//
// Where the provider's doorbell is a command that names the QP (rxe, siw), each
// call holds a reference that Close waits for, so no doorbell reaches the
// kernel after the QP is destroyed (its handle may name another QP by then).
func (qp *QP) PostSend(wrs []SendWR) (int, error) {
	w := sendsNoEscape(wrs) // the caller's requests may stay on its stack
	c := qp.pd.ctx
	// Each case in one test, no call in between: a post on rxe rings a
	// doorbell every time, and every instruction before it shows.
	if c.rec.Load() != nil {
		return qp.postSendRecorded(c, w)
	}
	if !c.postNamesQP {
		if qp.gone.Load() {
			return 0, errPostSendClosed
		}
		return qp.prov.PostSend(w)
	}
	if !qp.fastAcquire() {
		return 0, errPostSendClosed
	}
	// Released without a defer (~15 instructions a post): a provider that
	// panics has a bug, and Close then waits for the reference.
	n, err := qp.prov.PostSend(w)
	qp.fastRelease()
	return n, err
}

// postSendRecorded is PostSend in a cost span, for a context with a
// recorder.
func (qp *QP) postSendRecorded(c *Context, wrs []SendWR) (int, error) {
	if c.postNamesQP {
		if !qp.fastAcquire() {
			return 0, errPostSendClosed
		}
		defer qp.fastRelease()
	} else if qp.gone.Load() {
		return 0, errPostSendClosed
	}
	sp := c.begin("PostSend")
	n, err := qp.prov.PostSend(wrs)
	sp.end(err)
	return n, err
}

// PostRecv posts receive work requests. As with PostSend, the requests
// are not kept and may be a composite literal; nothing is allocated.
func (qp *QP) PostRecv(wrs []RecvWR) (int, error) {
	w := recvsNoEscape(wrs) // the caller's requests may stay on its stack
	c := qp.pd.ctx
	if c.rec.Load() != nil || qp.gone.Load() {
		return qp.postRecvSlow(c, w)
	}
	return qp.prov.PostRecv(w)
}

// postRecvSlow is PostRecv with a recorder or a closed QP.
func (qp *QP) postRecvSlow(c *Context, wrs []RecvWR) (int, error) {
	if qp.gone.Load() {
		return 0, errPostRecvClosed
	}
	sp := c.begin("PostRecv")
	n, err := qp.prov.PostRecv(wrs)
	sp.end(err)
	return n, err
}

// The fast path's errors on a closed QP (preallocated: it allocates nothing).
var (
	errPostSendClosed error = &OpError{Verb: "PostSend", Err: ErrClosed}
	errPostRecvClosed error = &OpError{Verb: "PostRecv", Err: ErrClosed}
)

func (qp *QP) destroyKernel() error {
	req := abi.IbUverbsDestroyQp{QpHandle: qp.handle}
	var resp abi.IbUverbsDestroyQpResp
	return qp.pd.ctx.destroyObject("DestroyQP", abi.UVERBS_OBJECT_QP, abi.UVERBS_METHOD_QP_DESTROY, qp.handle,
		abi.UVERBS_ATTR_DESTROY_QP_RESP, abi.Bytes(&resp),
		&abi.Command{Num: abi.IB_USER_VERBS_CMD_DESTROY_QP, In: abi.Bytes(&req), Out: abi.Bytes(&resp), Quick: qp.pd.ctx.cpuOnly})
}

// Close destroys the QP and releases its memory. Idempotent.
func (qp *QP) Close() error {
	// The span starts inside close: a Close after success is a no-op, not a call.
	return qp.close(func() (err error) {
		if sp := qp.pd.ctx.begin("DestroyQP"); sp.rec != nil {
			defer func() { sp.end(err) }()
		}
		if err := qp.destroyKernel(); err != nil {
			return err
		}
		qp.pd.ctx.qps.remove(qp.tag)
		return qp.prov.Close()
	})
}

// releaseProvider destroys the kernel object and frees the provider's
// memory when the context closes with the object still open. A failed
// destroy is not fatal: closing the file destroys the object.
func (qp *QP) releaseProvider() error {
	return qp.close(func() error {
		qp.destroyKernel()
		qp.pd.ctx.qps.remove(qp.tag)
		return qp.prov.Close()
	})
}

// srqLifetime is srq's lifetime, or nil for no SRQ.
func srqLifetime(srq *SRQ) *lifetime {
	if srq == nil {
		return nil
	}
	return &srq.lifetime
}
