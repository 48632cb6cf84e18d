package mlx5

import (
	"fmt"
	"math/bits"
	"sync/atomic"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/doorbell"
	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/provider/internal/queuelock"
)

// maxWQEBytes is the largest send WQE the DS field (6 bits of 16-byte
// units) can describe.
const maxWQEBytes = 63 * segSize

// sendQueue is a QP's send ring: WQEBBs of 64 bytes; what the producer
// needs to post and what Poll needs to retire.
type sendQueue struct {
	mem  *mmap.Region
	off  int    // the ring's offset in mem
	ring []byte // cnt WQEBBs
	cnt  uint32 // power of two, or 0 for a QP without a send queue

	head uint32        // producer counter in WQEBBs (under qp.sqMu)
	pub  atomic.Uint32 // head, published once the WQEs and wrids are written
	tail atomic.Uint32 // first WQEBB not yet retired by Poll
	// single: the QP is single-threaded; pub and tail take plain stores.
	single bool

	slots []sendSlot // by WQEBB index of a WQE's start

	shape  sqShape
	sigAll bool
	// plans holds the plans of a list's first WRs from the check pass to
	// the build pass (under qp.sqMu; kept here so that PostSend need not
	// zero an array on every call).
	plans [8]sendPlan
	// fmCache is the fence the next WQE carries: the initiator small
	// fence after a UMR (a window bind or invalidation), so that what
	// follows sees the window changed, as rdma-core's fm_cache.
	fmCache uint8
}

// sendSlot is what completing a WQE needs, by the WQEBB index of its
// start: one slot, so that a post and a poll index one slice.
type sendSlot struct {
	wrid uint64            // the WR's ID
	next uint32            // head after the WQE: where the tail moves when it completes
	op   provider.WCOpcode // what the WQE was, for error completions
}

// recvQueue is a QP's receive ring: WQEs of 1<<shift bytes, consumed by the
// device in order.
type recvQueue struct {
	ring   []byte
	cnt    uint32
	shift  uint32
	maxSGE uint32 // as created (QPCap.MaxRecvSGE)

	head uint32 // producer counter (under qp.rqMu)
	pub  atomic.Uint32
	tail atomic.Uint32
	wrid []uint64
	// single: the QP is single-threaded; pub and tail take plain stores.
	single bool
}

// retire completes the oldest receive WQE and returns its wr_id, or false
// if none is outstanding. It runs under the CQ's lock.
func (r *recvQueue) retire() (uint64, bool) {
	head := r.pub.Load()
	t := r.tail.Load()
	if t == head {
		return 0, false
	}
	id := r.wrid[t&(r.cnt-1)]
	storeCounter(&r.tail, t+1, r.single) // after the read: PostRecv may reuse the slot from here on
	return id, true
}

// qp is a queue pair: one buffer holding the receive ring then the send
// ring, and its doorbell record, in user memory the kernel pinned.
type qp struct {
	ctx *context
	typ provider.QPType
	mem *mmap.Region
	// sendRec and recvRec are the counters' words of the doorbell record,
	// in mem (kept so that a post need not index mem for them).
	sendRec, recvRec *uint32
	qpn              uint32
	uidx             uint32
	key              uint32 // the resource table key: uidx, or qpn with CQE version 0
	bf               *bfreg
	srq              *srq
	scq              *cq // the CQs whose CQEs name this QP: cleaned on RESET and Close
	rcq              *cq
	state            atomic.Uint32 // provider.QPState

	sqMu     queuelock.Mutex
	sq       sendQueue
	rqMu     queuelock.Mutex
	rq       recvQueue
	closed   atomic.Bool
	released bool

	eceState // ECE (ece.go), under the uverbs QP's modify lock
}

// sendHeader is the largest fixed part of a send WQE for each QP type:
// RC ctrl+raddr+atomic, UC ctrl+raddr, UD ctrl+AV.
func sendHeader(t provider.QPType) uint32 {
	switch t {
	case provider.QPTypeRC:
		return ctrlSize + raddrSize + atomicSize
	case provider.QPTypeUC:
		return ctrlSize + raddrSize
	case provider.QPTypeXRCIni:
		return ctrlSize + xrcSegSize + raddrSize + atomicSize
	}
	return ctrlSize + avSize
}

func pow2(n uint32) uint32 {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len32(n-1)
}

// qpSetup is a CREATE_QP in progress.
type qpSetup struct {
	q   *qp
	in  abi.Mlx5IbCreateQp
	out abi.Mlx5IbCreateQpResp
	ib  []byte
	ob  []byte
}

// CreateQP sizes the rings for a.Cap, allocates them and their doorbell
// record, picks the doorbell register (dynamic UARs), reserves a user index
// (CQE version 1), and prepares the create command's driver data.
func (c *context) CreateQP(a provider.QPAttr) (provider.Setup[provider.QPCreated, provider.QP], error) {
	switch a.Type {
	case provider.QPTypeRC, provider.QPTypeUC, provider.QPTypeUD, provider.QPTypeXRCIni:
	default:
		return nil, fmt.Errorf("mlx5: CreateQP: %w", notSupported("QP type %s", a.Type))
	}
	if a.Type == provider.QPTypeXRCIni && (a.SRQ != nil || a.RecvCQ != nil || a.Cap.MaxRecvWR != 0 || a.Cap.MaxRecvSGE != 0) {
		return nil, fmt.Errorf("mlx5: CreateQP: %w", invalid("an XRC initiator has no receive queue, receive CQ or SRQ"))
	}
	q := &qp{ctx: c, typ: a.Type}
	if a.SRQ != nil {
		s, ok := a.SRQ.(*srq)
		if !ok {
			return nil, fmt.Errorf("mlx5: CreateQP: %w", invalid("the SRQ is not an mlx5 SRQ"))
		}
		q.srq = s
	}
	scq, ok1 := a.SendCQ.(*cq)
	rcq, ok2 := a.RecvCQ.(*cq)
	if a.Type == provider.QPTypeXRCIni {
		rcq, ok2 = nil, true
	}
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("mlx5: CreateQP: %w", invalid("the CQs must be mlx5 CQs"))
	}
	if a.SingleThreaded && (!scq.single || (rcq != nil && !rcq.single)) {
		return nil, fmt.Errorf("mlx5: CreateQP: %w", invalid("a single-threaded QP needs single-threaded CQs"))
	}
	q.scq, q.rcq = scq, rcq

	// Send ring.
	limit := uint32(maxWQEBytes)
	if d := uint32(c.resp.MaxSqDescSz); d > 0 && d < limit {
		limit = d
	}
	capc := a.Cap
	inl := uint32(0)
	if capc.MaxInlineData > 0 {
		inl = (inlHdrSize + capc.MaxInlineData + segSize - 1) &^ (segSize - 1)
	}
	wqe := sendHeader(a.Type) + max(capc.MaxSendSGE*dataSize, inl)
	if a.Type == provider.QPTypeRC || a.Type == provider.QPTypeUC || a.Type == provider.QPTypeXRCIni {
		// A memory-window bind fits any RC, UC or XRC initiator WQE (on
		// the initiator it has no XRC segment).
		wqe = max(wqe, umrWQEBytes)
	}
	if wqe > limit {
		return nil, fmt.Errorf("mlx5: CreateQP: %w", invalid("%d send SGEs and %d bytes inline need %d-byte WQEs, the device takes %d",
			capc.MaxSendSGE, capc.MaxInlineData, wqe, limit))
	}
	bbs := (wqe + wqeBB - 1) / wqeBB
	var sqCnt uint32
	if capc.MaxSendWR > 0 {
		if uint64(capc.MaxSendWR)*uint64(bbs) > 1<<16 {
			return nil, fmt.Errorf("mlx5: CreateQP: %w", invalid("%d send WRs of %d WQEBBs exceed the 65536-WQEBB ring", capc.MaxSendWR, bbs))
		}
		sqCnt = pow2(capc.MaxSendWR * bbs)
		if m := c.resp.MaxSendWqebb; m > 0 && sqCnt > m {
			return nil, fmt.Errorf("mlx5: CreateQP: %w", invalid("%d send WRs need %d WQEBBs, the device allows %d", capc.MaxSendWR, sqCnt, m))
		}
	}

	// Receive ring (none with an SRQ).
	var rqCnt, rqShift uint32
	if q.srq == nil && capc.MaxRecvWR > 0 {
		gs := max(capc.MaxRecvSGE, 1)
		size := pow2(gs * dataSize)
		if m := uint32(c.resp.MaxRqDescSz); m > 0 && size > m {
			return nil, fmt.Errorf("mlx5: CreateQP: %w", invalid("%d receive SGEs need %d-byte WQEs, the device takes %d", capc.MaxRecvSGE, size, m))
		}
		rqShift = uint32(bits.TrailingZeros32(size))
		rqCnt = pow2(capc.MaxRecvWR)
		for rqCnt<<rqShift < wqeBB { // keep the send ring 64-byte aligned
			rqCnt <<= 1
		}
		if m := c.resp.MaxRecvWr; m > 0 && rqCnt > m {
			return nil, fmt.Errorf("mlx5: CreateQP: %w", invalid("%d receive WRs, the device allows %d", capc.MaxRecvWR, m))
		}
	}
	if q.srq != nil {
		capc.MaxRecvWR, capc.MaxRecvSGE = 0, 0
	}

	rqBytes := int(rqCnt << rqShift)
	sqBytes := int(sqCnt) * wqeBB
	dbrec := (rqBytes + sqBytes + wqeBB - 1) &^ (wqeBB - 1)
	mem, err := mmap.AnonymousOpts(dbrec+dbRecSize, mmap.Options{CopyOnFork: c.copyOnFork})
	if err != nil {
		return nil, fmt.Errorf("mlx5: CreateQP: %w", err)
	}
	q.mem = mem
	q.sendRec, q.recvRec = word(mem, dbrec+4*qpDBSend), word(mem, dbrec+4*qpDBRecv)
	b := mem.Bytes()
	q.rq = recvQueue{ring: b[:rqBytes], cnt: rqCnt, shift: rqShift, maxSGE: capc.MaxRecvSGE, wrid: make([]uint64, rqCnt)}
	q.sq = sendQueue{mem: mem, off: rqBytes, ring: b[rqBytes : rqBytes+sqBytes], cnt: sqCnt,
		slots: make([]sendSlot, sqCnt),
		shape: sqShape{caps: provider.SendQueueCaps{Type: a.Type, MaxSGE: capc.MaxSendSGE, MaxInline: capc.MaxInlineData},
			typ: a.Type, maxBBs: bbs, mws: &c.mws},
		sigAll: a.SignalAll}
	q.sq.shape.setPlain()
	single := a.SingleThreaded
	q.sqMu.Off, q.rqMu.Off, q.sq.single, q.rq.single = single, single, single, single

	s := &qpSetup{q: q}
	s.in.BufAddr = uint64(mem.Addr())
	s.in.DbAddr = uint64(mem.Addr()) + uint64(dbrec)
	s.in.SqWqeCount = sqCnt
	s.in.RqWqeCount = rqCnt
	s.in.RqWqeShift = rqShift
	if c.cqeVersion == 1 {
		u, err := c.allocUidx(&rsc{qp: q})
		if err != nil {
			mem.Close()
			return nil, err
		}
		q.uidx, q.key = u, u
		s.in.Uidx = u
	}
	bf, err := c.takeBfreg()
	if err != nil {
		s.Abort()
		return nil, err
	}
	if bf != nil {
		q.bf = bf
		s.in.Flags |= abi.MLX5_QP_FLAG_UAR_PAGE_INDEX
		s.in.BfregIndex = bf.index
	}
	if c.eceSupported() {
		s.in.EceOptions = eceTrigger
	}
	s.ib = append([]byte(nil), abi.Bytes(&s.in)...)
	s.ob = make([]byte, len(abi.Bytes(&s.out)))
	return s, nil
}

func (s *qpSetup) Udata() (in, out []byte) { return s.ib, s.ob }

func (s *qpSetup) Complete(c provider.QPCreated) (provider.QP, error) {
	copy(abi.Bytes(&s.out), s.ob)
	q := s.q
	q.qpn = c.QPN
	q.ece = s.out.EceOptions
	if q.bf == nil {
		bf, err := q.ctx.staticBfreg(s.out.BfregIndex)
		if err != nil {
			s.Abort()
			return nil, err
		}
		q.bf = bf
	}
	if q.ctx.cqeVersion == 0 {
		q.key = q.qpn
		q.ctx.rsc.set(q.key, &rsc{qp: q})
	}
	if err := q.ctx.track(q); err != nil {
		s.Abort()
		return nil, err
	}
	return q, nil
}

func (s *qpSetup) Abort() { s.q.release() }

// release gives back the user index, the bfreg and the rings.
func (q *qp) release() {
	if q.released {
		return
	}
	q.released = true
	if q.uidx != 0 || q.ctx.cqeVersion == 0 && q.key != 0 {
		q.ctx.rsc.set(q.key, nil)
	}
	q.ctx.giveBfreg(q.bf)
	q.mem.Close()
}

// Close releases the QP's memory, after the kernel QP is destroyed: its
// CQEs not yet polled are removed from its CQs (receive CQEs through an SRQ
// give their WQEs back to it), then its user index, doorbell register and
// rings are released. PostSend and PostRecv after Close return an error
// wrapping provider.ErrClosed.
func (q *qp) Close() error {
	q.sqMu.Lock()
	q.rqMu.Lock()
	defer q.rqMu.Unlock()
	defer q.sqMu.Unlock()
	if q.closed.Swap(true) {
		return nil
	}
	q.cleanCQs()
	q.ctx.forget(q)
	q.release()
	return nil
}

// cleanCQs removes the QP's CQEs from its receive CQ (returning the SRQ
// WQEs they hold) and from its send CQ, as rdma-core does on RESET and
// destroy. A QP without a key (never completed) has none.
func (q *qp) cleanCQs() {
	if q.key == 0 {
		return
	}
	if q.rcq != nil {
		q.rcq.clean(q.key, q.srq)
	}
	if q.scq != nil && q.scq != q.rcq {
		q.scq.clean(q.key, nil)
	}
}

// Modified records the QP's state after MODIFY_QP. A QP moved to RESET
// starts over with empty rings, as the device's does, and its CQEs still
// in its CQs are removed (they belong to its previous life).
func (q *qp) Modified(st provider.QPState) {
	if st == provider.QPStateReset {
		q.sqMu.Lock()
		q.rqMu.Lock()
		if !q.closed.Load() {
			q.cleanCQs()
		}
		q.sq.head, q.sq.fmCache = 0, 0
		q.sq.pub.Store(0)
		q.sq.tail.Store(0)
		q.rq.head = 0
		q.rq.pub.Store(0)
		q.rq.tail.Store(0)
		if !q.closed.Load() {
			doorbell.StoreRecord(q.recvRec, 0)
			doorbell.StoreRecord(q.sendRec, 0)
		}
		q.rqMu.Unlock()
		q.sqMu.Unlock()
	}
	q.state.Store(uint32(st))
}

// PostSend validates every WR, then writes their WQEs, the send counter to
// the doorbell record, and rings the doorbell once: a BlueFlame copy of a
// lone small WQE, else an 8-byte store. It allocates nothing and makes no
// syscall; on a validation error nothing is written.
//
// One WR, the common case, is posted in one pass and without a deferred
// unlock; a plain one (send_plain.go) with fixed offsets and rung by
// ringOne. A WR it would refuse goes to postList, which says why.
func (q *qp) PostSend(wrs []provider.SendWR) (int, error) {
	if len(wrs) != 1 {
		return q.postMany(wrs)
	}
	wr := &wrs[0]
	q.sqMu.Lock()
	sq := &q.sq
	if q.closed.Load() || q.ctx.lost.Load() || !sendable(provider.QPState(q.state.Load())) {
		return q.postListLocked(wrs)
	}
	head := sq.head
	if isPlain(&sq.shape, wr) && head-sq.tail.Load() < sq.cnt {
		bb := sq.writePlain(head, q.qpn, wr)
		sq.head = head + 1
		storeCounter(&sq.pub, head+1, sq.single)
		doorbell.ToDevice()
		doorbell.StoreRecord(q.sendRec, (head+1)&0xffff)
		q.bf.ringOne(bb)
		q.sqMu.Unlock()
		return 1, nil
	}
	p := &sq.plans[0]
	if !provider.SendOK(&sq.shape.caps, wr) || planSend(&sq.shape, wr, p) != nil ||
		p.bbs > sq.cnt-(head-sq.tail.Load()) {
		return q.postListLocked(wrs)
	}
	sq.write(head, q.qpn, wr, p)
	sq.head = head + p.bbs
	storeCounter(&sq.pub, sq.head, sq.single)
	q.ring(head, p.bbs, true)
	q.sqMu.Unlock()
	return 1, nil
}

// postListLocked is postList with q.sqMu held; it unlocks. PostSend's slow
// branches call it so that PostSend itself sets up no defer on every call
// (a larger frame, zeroed at entry: 8 instructions a post).
func (q *qp) postListLocked(wrs []provider.SendWR) (int, error) {
	defer q.sqMu.Unlock()
	return q.postList(wrs)
}

// postMany is PostSend of a list other than one WR.
func (q *qp) postMany(wrs []provider.SendWR) (int, error) {
	if len(wrs) == 0 {
		return 0, nil
	}
	q.sqMu.Lock()
	return q.postListLocked(wrs)
}

// sendable reports whether a QP in state st takes sends: not before RTS.
func sendable(st provider.QPState) bool {
	return st > provider.QPStateRTR // RTS, SQD, SQE, ERR (ERR flushes)
}

// postList is PostSend of a list (or of a WR PostSend took alone and refused), with
// q.sqMu held.
func (q *qp) postList(wrs []provider.SendWR) (int, error) {
	if q.closed.Load() {
		return 0, &provider.WRError{Provider: "mlx5", Verb: "PostSend", Opcode: wrs[0].Opcode, Err: provider.ErrClosed}
	}
	if q.ctx.lost.Load() {
		return 0, &provider.WRError{Provider: "mlx5", Verb: "PostSend", Opcode: wrs[0].Opcode, Err: errDeviceLost}
	}
	if st := provider.QPState(q.state.Load()); !sendable(st) {
		return 0, &provider.WRError{Provider: "mlx5", Verb: "PostSend", Opcode: wrs[0].Opcode, Err: invalid("the QP is in state %s; sends need RTS", st)}
	}
	sq := &q.sq
	free := sq.cnt - (sq.head - sq.tail.Load())
	need := uint32(0)
	var spare sendPlan // the plan of a WR past the first len(sq.plans)
	for i := range wrs {
		p := &spare
		if i < len(sq.plans) {
			p = &sq.plans[i]
		}
		var err error
		if !provider.SendOK(&sq.shape.caps, &wrs[i]) { // inlined; CheckSend says why
			err = provider.CheckSend(&sq.shape.caps, &wrs[i])
		}
		if err == nil {
			err = planSend(&sq.shape, &wrs[i], p)
		}
		if err == nil && need+p.bbs > free {
			err = fmt.Errorf("%w: the send queue is full (%d of %d WQEBBs in use)", errNoMemory, sq.cnt-free+need, sq.cnt)
		}
		if err != nil {
			return i, &provider.WRError{Provider: "mlx5", Verb: "PostSend", Index: i, Opcode: wrs[i].Opcode, Err: err}
		}
		need += p.bbs
	}
	head := sq.head
	var last, lastBBs uint32
	for i := range wrs {
		wr := &wrs[i]
		p := &spare
		if i < len(sq.plans) {
			p = &sq.plans[i]
		} else {
			planSend(&sq.shape, wr, p) // accepted in the check pass
		}
		sq.write(head, q.qpn, wr, p)
		last, lastBBs = head, p.bbs
		head += p.bbs
	}
	sq.head = head
	storeCounter(&sq.pub, head, sq.single)
	q.ring(last, lastBBs, len(wrs) == 1)
	return len(wrs), nil
}

// write writes wr's WQE, which p planned, at producer counter head, and
// records what its completion needs. q.sqMu held.
func (sq *sendQueue) write(head, qpn uint32, wr *provider.SendWR, p *sendPlan) {
	signal := sq.sigAll || wr.Flags&provider.SendSignaled != 0
	p.fence, sq.fmCache = sq.fmCache, 0
	buildSend(sq.ring, head, qpn, wr, p, signal)
	idx := head & (sq.cnt - 1)
	sl := &sq.slots[idx]
	sl.wrid, sl.next = wr.ID, head+p.bbs
	sl.op, _ = reqOpcode(p.opcode)
	if p.opcode == opUMR {
		sl.op, sq.fmCache = provider.WCBindMW, ctrlSmallFence
		if wr.Opcode == provider.WRLocalInv {
			sl.op = provider.WCLocalInv
		}
	}
}

// ring publishes the send counter in the doorbell record and rings the
// doorbell for the WQEs up to the one at counter last (lastBBs WQEBBs;
// single: the only one posted, which may go by BlueFlame). q.sqMu held.
func (q *qp) ring(last, lastBBs uint32, single bool) {
	sq := &q.sq
	doorbell.ToDevice()
	doorbell.StoreRecord(q.sendRec, sq.head&0xffff)
	off := int(last&(sq.cnt-1)) * wqeBB
	q.bf.ringSend(sq, last, lastBBs, single, be.Uint64(sq.ring[off:]))
}

// PostRecv validates every WR, writes the receive WQEs and the receive
// counter to the doorbell record. There is no MMIO write.
func (q *qp) PostRecv(wrs []provider.RecvWR) (int, error) {
	if len(wrs) == 1 && len(wrs[0].SGL) == 1 && q.postRecvOne(&wrs[0]) {
		return 1, nil
	}
	return q.postRecvList(wrs)
}

// postRecvOne posts wr, one receive of one non-empty SGE: what most
// programs post, alone, each time a receive completes. Its WQE is one data
// segment (and the terminator, if the stride has room for another), written
// without postRecvList's loops. false if it posted nothing, for any reason:
// postRecvList then posts wr or says why it cannot (TestRecvOneMatchesList
// checks that both leave the same queue and answer). icount.sh PostRecv:
// 275 -> 195 instructions a receive.
func (q *qp) postRecvOne(wr *provider.RecvWR) bool {
	s := &wr.SGL[0]
	if q.srq != nil || s.Length == 0 || s.Length > provider.MaxMessage {
		return false
	}
	q.rqMu.Lock()
	rq := &q.rq
	if q.closed.Load() || q.ctx.lost.Load() || provider.QPState(q.state.Load()) == provider.QPStateReset ||
		rq.maxSGE == 0 || rq.head-rq.tail.Load() >= rq.cnt {
		q.rqMu.Unlock()
		return false
	}
	head := rq.head
	idx := head & (rq.cnt - 1)
	off := int(idx) << rq.shift
	putDataSeg(rq.ring[off:], s.Length, s.LKey, s.Addr)
	if rq.shift > dataShift { // room for a second segment: the list's end
		putDataSeg(rq.ring[off+dataSize:], 0, invalidLKey, 0)
	}
	rq.wrid[idx] = wr.ID
	// The tail below is postRecvList's, written out: as a method it costs
	// 87 in the inliner's budget of 80, and its call ~15 instructions here.
	head++
	rq.head = head
	storeCounter(&rq.pub, head, rq.single)
	doorbell.ToDevice()
	doorbell.StoreRecord(q.recvRec, head&0xffff)
	q.rqMu.Unlock()
	return true
}

// postRecvList is PostRecv of any list.
func (q *qp) postRecvList(wrs []provider.RecvWR) (int, error) {
	if len(wrs) == 0 {
		return 0, nil
	}
	if q.srq != nil {
		return 0, &provider.WRError{Provider: "mlx5", Verb: "PostRecv", Err: invalid("the QP receives through an SRQ; post to the SRQ")}
	}
	// Unlocked by hand on every way out: a deferred unlock costs a post
	// of one WR ~30 of its ~300 instructions.
	q.rqMu.Lock()
	var err error
	switch {
	case q.closed.Load():
		err = provider.ErrClosed
	case q.ctx.lost.Load():
		err = errDeviceLost
	case provider.QPState(q.state.Load()) == provider.QPStateReset:
		err = invalid("the QP is in state RESET")
	}
	if err != nil {
		q.rqMu.Unlock()
		return 0, &provider.WRError{Provider: "mlx5", Verb: "PostRecv", Err: err}
	}
	rq := &q.rq
	used := rq.head - rq.tail.Load()
	for i := range wrs {
		if !provider.RecvOK(rq.maxSGE, &wrs[i]) { // inlined; CheckRecv says why
			err = provider.CheckRecv(rq.maxSGE, &wrs[i])
		}
		if err == nil && used+uint32(i) >= rq.cnt {
			err = fmt.Errorf("%w: the receive queue is full (%d WQEs)", errNoMemory, rq.cnt)
		}
		if err != nil {
			q.rqMu.Unlock()
			return i, &provider.WRError{Provider: "mlx5", Verb: "PostRecv", Index: i, Err: err}
		}
	}
	head := rq.head
	size := 1 << rq.shift
	for i := range wrs {
		idx := head & (rq.cnt - 1)
		off := int(idx) << rq.shift
		buildRecv(rq.ring[off:off+size:off+size], wrs[i].SGL)
		rq.wrid[idx] = wrs[i].ID
		head++
	}
	rq.head = head
	storeCounter(&rq.pub, head, rq.single)
	doorbell.ToDevice()
	doorbell.StoreRecord(q.recvRec, head&0xffff)
	q.rqMu.Unlock()
	return len(wrs), nil
}
