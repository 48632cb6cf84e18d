package rxe

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/doorbell"
	"github.com/goverbs/goverbs/internal/usermem"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/provider/internal/queuelock"
	"github.com/goverbs/goverbs/provider/internal/writedoorbell"
	"golang.org/x/sys/unix"
)

// CreateQP prepares a QP. The kernel refuses driver input for rxe QPs
// (udata inlen must be 0); its answer is struct rxe_create_qp_resp, the mmap
// info of the receive and send queues.
func (c *Context) CreateQP(a provider.QPAttr) (provider.Setup[provider.QPCreated, provider.QP], error) {
	switch a.Type {
	case provider.QPTypeRC, provider.QPTypeUC, provider.QPTypeUD:
	default:
		return nil, fmt.Errorf("rxe: QP type %v: %w", a.Type, provider.ErrNotSupported)
	}
	return &qpSetup{c: c, a: a}, nil
}

// qpSetup is CreateQP's setup, the response buffer inside it: one
// allocation where a SetupFunc, its closure and the buffer were three.
type qpSetup struct {
	c    *Context
	a    provider.QPAttr
	resp abi.RxeCreateQpResp
}

// Udata is the response buffer.
func (s *qpSetup) Udata() (in, out []byte) { return nil, abi.Bytes(&s.resp) }

// Complete maps the queues and returns the QP.
func (s *qpSetup) Complete(cr provider.QPCreated) (provider.QP, error) {
	return s.c.newQP(s.a, cr, s.resp)
}

// Abort does nothing: the setup holds no resource.
func (s *qpSetup) Abort() {}

func (c *Context) newQP(a provider.QPAttr, cr provider.QPCreated, resp abi.RxeCreateQpResp) (*QP, error) {
	sq, err := mapQueue(c.f, "send", resp.SqMi, sendWQESize+sgeSize)
	if err != nil {
		return nil, err
	}
	qp := &QP{
		c:      c,
		typ:    a.Type,
		handle: cr.Handle,
		qpn:    cr.QPN,
		db:     writedoorbell.New(cr.Handle),
	}
	room := uint32(sq.slotSize() - sendWQESize)
	qp.sq = sendQueue{
		mu:   queuelock.Mutex{Off: a.SingleThreaded},
		q:    sq,
		prod: sq.prod.Load() & sq.mask,
		caps: provider.SendQueueCaps{Type: a.Type, MaxSGE: min(cr.Cap.MaxSendSGE, room/uint32(sgeSize)),
			MaxInline: min(cr.Cap.MaxInlineData, room)},
	}
	qp.sq.setPlain()
	if a.SRQ == nil {
		rq, err := mapQueue(c.f, "receive", resp.RqMi, recvWQESize+sgeSize)
		if err != nil {
			sq.close()
			return nil, err
		}
		qp.rq = newRecvQueue(rq, cr.Cap.MaxRecvSGE)
		qp.rq.mu.Off = a.SingleThreaded // an SRQ's queue, shared, keeps its lock
	}
	if a.Type == provider.QPTypeRC || a.Type == provider.QPTypeUC {
		c.qpMu.Lock()
		if c.qps == nil {
			c.qps = map[uint32]*QP{}
		}
		c.qps[qp.qpn] = qp
		c.qpMu.Unlock()
	}
	return qp, nil
}

// QP is an rxe queue pair. The send and receive queues are kernel memory
// mapped from the command file; a send is posted by writing WQEs at the
// producer index, publishing the index with a store-release, and writing the
// doorbell (one write() per PostSend call, or one per 64 KiB of a longer
// list: see the package's costs); a receive needs no syscall.
//
// PostSend and PostRecv are safe for concurrent use: each queue has a mutex,
// held while the list is checked and copied in (not across the doorbell
// write). Modified may run concurrently with both. A single-threaded QP
// (provider.QPAttr.SingleThreaded) has its queues' mutexes off: the program
// orders its calls.
type QP struct {
	c      *Context
	typ    provider.QPType
	handle uint32
	qpn    uint32
	state  atomic.Uint32 // provider.QPState, as MODIFY_QP left it
	sq     sendQueue
	rq     *recvQueue // nil when the QP uses an SRQ
	db     *writedoorbell.Doorbell
}

var _ provider.QP = (*QP)(nil)

type sendQueue struct {
	mu   queuelock.Mutex // off on a single-threaded QP
	q    *queue
	prod uint32 // producer index (masked); we are the only producer
	ssn  uint32 // send sequence number, as librxe numbers WQEs
	caps provider.SendQueueCaps
	// plain and plainInline are the opcodes (1<<op) of plain WRs without
	// and with INLINE (send_plain.go), set with caps.
	plain, plainInline uint32
}

// State is the QP state the provider last heard of through Modified.
func (qp *QP) State() provider.QPState { return provider.QPState(qp.state.Load()) }

// Modified records the state MODIFY_QP moved the QP to. rxe's queues need
// nothing else: the kernel keeps the indices across a reset.
func (qp *QP) Modified(s provider.QPState) { qp.state.Store(uint32(s)) }

// Caps reports the limits PostSend and PostRecv enforce.
func (qp *QP) Caps() (maxSendSGE, maxInline, maxRecvSGE uint32) {
	if qp.rq != nil {
		maxRecvSGE = qp.rq.maxSGE
	}
	return qp.sq.caps.MaxSGE, qp.sq.caps.MaxInline, maxRecvSGE
}

// PostSend checks every request, then copies them all into the send queue,
// publishes the producer index once and rings the doorbell once. On a
// refused request nothing is posted and the error (a *WRError) names it.
// It allocates nothing unless it fails.
func (qp *QP) PostSend(wrs []provider.SendWR) (int, error) {
	if len(wrs) == 1 && qp.sq.isPlain(&wrs[0]) {
		return qp.postPlain(&wrs[0])
	}
	if len(wrs) == 0 {
		return 0, nil
	}
	sq := &qp.sq
	sq.mu.Lock()
	q := sq.q
	if q == nil || q.mem == nil {
		sq.mu.Unlock()
		return 0, errClosedSend(wrs[0].Opcode)
	}
	if st := qp.State(); st < provider.QPStateRTS {
		sq.mu.Unlock()
		return 0, errSendState(wrs[0].Opcode, st)
	}
	for i := range wrs {
		if provider.SendOK(&sq.caps, &wrs[i]) { // inlined: the common request, RC or UC
			continue
		}
		if err := qp.checkSend(i, &wrs[i]); err != nil {
			sq.mu.Unlock()
			return i, err
		}
	}
	prod := sq.prod
	used := (prod - q.cons.Load()) & q.mask // acquire: the kernel is done with slots before cons
	if free := q.mask - used; uint32(len(wrs)) > free {
		sq.mu.Unlock()
		return int(free), errSendFull(int(free), wrs[free].Opcode, used, q.mask, len(wrs))
	}
	// out bounds the bytes the next doorbell's requester run sends:
	// every request's length but an RDMA READ's (its requester sends a
	// request only; an atomic's 8 bytes and the local operations' 0
	// count for nothing either way). A list that would send more than
	// writedoorbell.RawMax is rung in parts (ringPart), so that no
	// doorbell but one of a single larger request is a regular syscall.
	var out uint64
	var partErr error
	for i := range wrs {
		n := uint64(qp.fillSend(q, prod, &wrs[i]))
		if wrs[i].Opcode == provider.WRRDMARead {
			n = 0
		}
		if out > 0 && out+n > writedoorbell.RawMax && partErr == nil {
			partErr = qp.ringPart(prod, out) // wrs[:i]: this one's WQE is not published yet
			out = 0
		}
		out += n
		prod = (prod + 1) & q.mask
	}
	sq.prod = prod
	doorbell.Publish32(q.prod, prod) // release: the WQEs are complete before the kernel sees the index
	sq.mu.Unlock()
	if partErr != nil {
		// Every request is in the queue; an earlier part's doorbell
		// failed, and the kernel takes them all at the next one.
		return len(wrs), &DoorbellError{Provider: "rxe", Posted: len(wrs), Err: partErr}
	}
	return qp.ring(out, len(wrs))
}

// ringPart publishes the send queue's producer index prod and writes the
// doorbell, the send queue's lock held, for the part of a long list filled
// so far, which sends out bytes: at most writedoorbell.RawMax (a raw
// syscall) unless it is a single larger request. On Linux 6.1, where
// rxe's requester runs inside the doorbell's write(), a regular syscall
// that long lets the runtime's monitor take the thread's P and hand it to
// another thread, and wake every 20 µs for a while after: perftest's
// send_bw of 16 64 KiB SENDs a list ran ~5% slower than with every
// doorbell raw (test/perf/mix.sh, docs/COST.md, session 45). In parts, a
// stop-the-world still waits for at most one part's sending.
func (qp *QP) ringPart(prod uint32, out uint64) error {
	qp.sq.prod = prod
	doorbell.Publish32(qp.sq.q.prod, prod)
	return writedoorbell.Ring(qp.c.f, qp.db, out)
}

// ring writes the doorbell for posted WRs just published, which send out
// bytes, and returns PostSend's result.
func (qp *QP) ring(out uint64, posted int) (int, error) {
	var err error
	if out <= writedoorbell.RawMax {
		err = qp.c.f.Doorbell(qp.db.Cmd[:])
	} else {
		err = qp.c.f.Write(qp.db.Cmd[:])
	}
	if err == nil && qp.State() == provider.QPStateErr {
		// Sends posted in ERR must complete flushed. Linux 6.1 and later
		// flush them from the doorbell's requester run; 5.10's requester
		// returns at once in ERR, and only the completer, run when the QP
		// is moved to ERR, flushes the send queue (rxe_qp_error). Moving
		// it to ERR again is that doorbell, as PostRecv does for receives.
		err = qp.c.k.ModifyQPState(qp.handle, provider.QPStateErr)
	}
	if err != nil {
		runtime.KeepAlive(qp.db)
		return posted, &DoorbellError{Provider: "rxe", Posted: posted, Err: err}
	}
	runtime.KeepAlive(qp.db)
	return posted, nil
}

// PostSend's refusals before any WR is checked or written.

func errClosedSend(op provider.WROpcode) error {
	return &WRError{Provider: "rxe", Verb: "PostSend", Opcode: op, Err: fmt.Errorf("the QP is %w", provider.ErrClosed)}
}

func errSendState(op provider.WROpcode, st provider.QPState) error {
	return &WRError{Provider: "rxe", Verb: "PostSend", Opcode: op,
		Err: provider.Invalid("the QP is in state %v; sends need RTS (the kernel refuses the doorbell with EINVAL)", st)}
}

func errSendFull(index int, op provider.WROpcode, used, mask uint32, n int) error {
	return &WRError{Provider: "rxe", Verb: "PostSend", Index: index, Opcode: op,
		Err: fmt.Errorf("%w: the send queue is full (%d of %d slots in use, %d requests in the list)", unix.ENOMEM, used, mask, n)}
}

// checkSend refuses what the kernel would fail or what librxe refuses, so a
// bad list never reaches the queue: the checks every provider shares
// (provider.CheckSend), then an rxe address handle on UD. PostSend calls
// it for a request provider.SendOK did not accept at once.
func (qp *QP) checkSend(i int, wr *provider.SendWR) error {
	err := provider.CheckSend(&qp.sq.caps, wr)
	if err == nil && qp.typ == provider.QPTypeUD {
		if _, ok := wr.UD.AH.ProviderAH().(*AH); !ok {
			err = provider.Invalid("the address handle does not belong to an rxe device")
		}
	}
	if err != nil {
		return &WRError{Provider: "rxe", Verb: "PostSend", Index: i, Opcode: wr.Opcode, Err: err}
	}
	return nil
}

// fillSend writes wr into the send queue slot at index i, as librxe's
// init_send_wqe lays it out (ABI-NOTES §3 and §8: the kernel sends to iova,
// sends resid bytes and reports length in the sender's completion), and
// returns the request's length.
func (qp *QP) fillSend(q *queue, i uint32, wr *provider.SendWR) uint32 {
	sq := &qp.sq
	w := q.sendWQE(i)
	*w = abi.RxeSendWqe{}
	w.Wr.WrId = wr.ID
	w.Wr.Opcode = uint32(wr.Opcode)
	w.Wr.SendFlags = uint32(wr.Flags)
	// One switch with a case per opcode (a jump table): the fields each
	// opcode uses.
	switch wr.Opcode {
	case provider.WRSendWithImm:
		binary.BigEndian.PutUint32(w.Wr.Ex[:], wr.Imm) // __be32: the value travels as the application means it
	case provider.WRSendWithInv, provider.WRLocalInv:
		w.Wr.SetExInvalidateRkey(wr.InvalidateRKey)
	case provider.WRRDMAWriteWithImm:
		binary.BigEndian.PutUint32(w.Wr.Ex[:], wr.Imm)
		setRDMA(w, wr)
	case provider.WRRDMAWrite, provider.WRRDMARead:
		setRDMA(w, wr)
	case provider.WRAtomicCmpAndSwp, provider.WRAtomicFetchAndAdd:
		w.Wr.SetWrAtomicRemoteAddr(wr.RemoteAddr)
		w.Wr.SetWrAtomicCompareAdd(wr.CompareAdd)
		w.Wr.SetWrAtomicSwap(wr.Swap)
		w.Wr.SetWrAtomicRkey(wr.RKey)
		w.Iova = wr.RemoteAddr
	case provider.WRBindMW:
		// What rxe_bind_mw (rxe_mw.c) reads: the window by mw_rkey, the
		// MR by mr_lkey (only for a nonzero length), the new key's low
		// byte from rkey, the access bits (IB_ACCESS_*, the values of
		// IBV_ACCESS_*), addr and length. librxe also sets iova to addr.
		b := &wr.Bind
		w.Wr.SetWrMwAddr(b.Addr)
		w.Wr.SetWrMwLength(b.Length)
		w.Wr.SetWrMwMrLkey(b.MRLKey)
		w.Wr.SetWrMwMwRkey(b.MWRKey)
		w.Wr.SetWrMwRkey(b.NewRKey)
		w.Wr.SetWrMwAccess(b.Access)
		w.Iova = b.Addr
	}
	if qp.typ == provider.QPTypeUD {
		ah := wr.UD.AH.ProviderAH().(*AH)
		w.Wr.SetWrUdRemoteQpn(wr.UD.RemoteQPN)
		w.Wr.SetWrUdRemoteQkey(wr.UD.QKey)
		w.Wr.SetWrUdAhNum(ah.num)
		if ah.num == 0 { // Linux before 5.16 reads the vector from the WQE; later ones, their own
			copy(w.Wr.Wr[udAVOffset:], abi.Bytes(&ah.av))
		}
	}
	var length uint32
	n := uint32(len(wr.SGL))
	if wr.Flags&provider.SendInline != 0 {
		for _, s := range wr.SGL {
			length += s.Length
		}
		dst := wqeInline(w, int(length))
		off := 0
		for _, s := range wr.SGL {
			off += copy(dst[off:], usermem.Bytes(s.Addr, int(s.Length)))
		}
		n = 0 // the bytes are in the WQE; no SGE follows
	} else {
		sges := wqeSGEs(w, len(wr.SGL))
		for j, s := range wr.SGL {
			sges[j] = abi.RxeSge{Addr: s.Addr, Length: s.Length, Lkey: s.LKey}
			length += s.Length
		}
	}
	w.Wr.Reserved = uint32(len(wr.SGL)) // num_sge before Linux 6.0
	w.Dma.Length = length
	w.Dma.Resid = length
	w.Dma.NumSge = n
	w.Ssn = sq.ssn
	sq.ssn++
	return length
}

// setRDMA sets an RDMA WRITE's or READ's remote address and key.
func setRDMA(w *abi.RxeSendWqe, wr *provider.SendWR) {
	w.Wr.SetWrRdmaRemoteAddr(wr.RemoteAddr)
	w.Wr.SetWrRdmaRkey(wr.RKey)
	w.Iova = wr.RemoteAddr
}

// PostRecv checks every request, then copies them into the receive queue and
// publishes the producer index once. No syscall, except on a QP in ERR: see
// the body.
func (qp *QP) PostRecv(wrs []provider.RecvWR) (n int, err error) {
	rq := qp.rq
	if rq == nil {
		if len(wrs) == 0 {
			return 0, nil
		}
		return 0, &WRError{Provider: "rxe", Verb: "PostRecv", Err: provider.Invalid("the QP receives through an SRQ; post to the SRQ")}
	}
	if isOne(wrs) && rq.postOne(&wrs[0]) {
		n = 1
	} else {
		n, err = rq.post("PostRecv", wrs)
	}
	if err == nil && n > 0 && qp.State() == provider.QPStateErr {
		// rxe flushes a QP's receive queue only when the QP is moved to
		// ERR (its responder task runs then): receives posted after that
		// would never complete. Moving it to ERR again is the doorbell
		// that flushes them: every receive gets its completion.
		if err := qp.c.k.ModifyQPState(qp.handle, provider.QPStateErr); err != nil {
			return n, &DoorbellError{Provider: "rxe", Posted: n, Err: err}
		}
	}
	return n, err
}

// Close unmaps the queues; uverbs calls it after the kernel QP is destroyed.
func (qp *QP) Close() error {
	qp.c.qpMu.Lock()
	if qp.c.qps[qp.qpn] == qp {
		delete(qp.c.qps, qp.qpn)
	}
	qp.c.qpMu.Unlock()
	qp.sq.mu.Lock()
	q := qp.sq.q
	qp.sq.q = nil
	qp.sq.mu.Unlock()
	err := q.close()
	if qp.rq != nil {
		if e := qp.rq.close(); err == nil {
			err = e
		}
	}
	return err
}

// recvQueue is a QP's receive queue or an SRQ's queue.
type recvQueue struct {
	mu     queuelock.Mutex // off on a single-threaded QP's own queue
	q      *queue
	prod   uint32
	maxSGE uint32
}

func newRecvQueue(q *queue, maxSGE uint32) *recvQueue {
	room := uint32(q.slotSize()-recvWQESize) / uint32(sgeSize)
	return &recvQueue{q: q, prod: q.prod.Load() & q.mask, maxSGE: min(maxSGE, room)}
}

func (rq *recvQueue) post(op string, wrs []provider.RecvWR) (int, error) {
	if len(wrs) == 0 {
		return 0, nil
	}
	rq.mu.Lock() // unlocked on every return, without a defer (PostRecv's cost)
	q := rq.q
	if q == nil || q.mem == nil {
		rq.mu.Unlock()
		return 0, &WRError{Provider: "rxe", Verb: op, Err: fmt.Errorf("the queue is %w", provider.ErrClosed)}
	}
	for i := range wrs {
		if !provider.RecvOK(rq.maxSGE, &wrs[i]) { // inlined; CheckRecv says why
			rq.mu.Unlock()
			return i, &WRError{Provider: "rxe", Verb: op, Index: i, Err: provider.CheckRecv(rq.maxSGE, &wrs[i])}
		}
	}
	prod := rq.prod
	used := (prod - q.cons.Load()) & q.mask
	if free := q.mask - used; uint32(len(wrs)) > free {
		rq.mu.Unlock()
		return int(free), &WRError{Provider: "rxe", Verb: op, Index: int(free),
			Err: fmt.Errorf("%w: the receive queue is full (%d of %d slots in use, %d requests in the list)", unix.ENOMEM, used, q.mask, len(wrs))}
	}
	for i := range wrs {
		fillRecv(q, prod, &wrs[i])
		prod = (prod + 1) & q.mask
	}
	rq.prod = prod
	doorbell.Publish32(q.prod, prod) // release
	rq.mu.Unlock()
	return len(wrs), nil
}

// fillRecv writes wr into slot prod of q: its SGEs, then the WQE.
func fillRecv(q *queue, prod uint32, wr *provider.RecvWR) {
	w := q.recvWQE(prod)
	sges := recvSGEs(w, len(wr.SGL))
	var length uint32
	for j, s := range wr.SGL {
		sges[j] = abi.RxeSge{Addr: s.Addr, Length: s.Length, Lkey: s.LKey}
		length += s.Length
	}
	w.WrId = wr.ID
	w.Reserved = uint32(len(wr.SGL)) // num_sge before Linux 6.0
	w.Padding = 0
	w.Dma = abi.RxeDmaInfo{Length: length, Resid: length, NumSge: uint32(len(wr.SGL))}
}

// isOne reports whether wrs is one receive of at most one SGE: what the
// ping-pongs (one SGE) and rsocket (none: its data arrives by RDMA WRITE
// with immediate) post, each time, and postOne takes.
func isOne(wrs []provider.RecvWR) bool { return len(wrs) == 1 && len(wrs[0].SGL) <= 1 }

// postOne posts wr, a receive of at most one SGE alone in its list,
// without the list's loops; false if it posted nothing, for any reason:
// post then posts wr or says why it cannot. FakePostRecv under callgrind:
// 201 -> 138 instructions a receive; rsocket's reposts (no SGE) took the
// list's path before, ~170 instructions each against ~85 here
// (test/perf/rstreamcg.sh).
func (rq *recvQueue) postOne(wr *provider.RecvWR) bool {
	var s *provider.SGE
	if len(wr.SGL) != 0 {
		s = &wr.SGL[0]
	}
	rq.mu.Lock()
	q := rq.q
	if q == nil || q.mem == nil || s != nil && (rq.maxSGE == 0 || s.Length > provider.MaxMessage) {
		rq.mu.Unlock()
		return false
	}
	prod := rq.prod
	if (prod-q.cons.Load())&q.mask == q.mask { // acquire, as post's: full
		rq.mu.Unlock()
		return false
	}
	fillRecvOne(q.recvWQE(prod), wr.ID, s)
	prod = (prod + 1) & q.mask
	rq.prod = prod
	doorbell.Publish32(q.prod, prod) // release
	rq.mu.Unlock()
	return true
}

// fillRecvOne is fillRecv, into WQE w, of a receive with ID id and the one
// SGE s, or none if s is nil. Small enough to inline into postOne (a call
// under TCG costs ~15 ns).
func fillRecvOne(w *abi.RxeRecvWqe, id uint64, s *provider.SGE) {
	var n, length uint32
	if s != nil {
		recvSGEs(w, 1)[0] = abi.RxeSge{Addr: s.Addr, Length: s.Length, Lkey: s.LKey}
		n, length = 1, s.Length
	}
	w.WrId = id
	w.Reserved = n // num_sge before Linux 6.0
	w.Padding = 0
	w.Dma = abi.RxeDmaInfo{Length: length, Resid: length, NumSge: n}
}

func (rq *recvQueue) close() error {
	rq.mu.Lock()
	q := rq.q
	rq.q = nil
	rq.mu.Unlock()
	return q.close()
}
