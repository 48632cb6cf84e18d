package siw

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/doorbell"
	"github.com/goverbs/goverbs/internal/usermem"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/provider/internal/queuelock"
	"github.com/goverbs/goverbs/provider/internal/release"
	"github.com/goverbs/goverbs/provider/internal/writedoorbell"
	"golang.org/x/sys/unix"
)

// CreateQP prepares a QP. siw takes no driver input; its answer is struct
// siw_uresp_create_qp: the sizes of the send and receive rings and their
// mmap keys. siw carries RC only (iWARP has no UC or UD).
func (c *Context) CreateQP(a provider.QPAttr) (provider.Setup[provider.QPCreated, provider.QP], error) {
	if a.Type != provider.QPTypeRC {
		return nil, fmt.Errorf("siw: QP type %v: iWARP carries RC only: %w", a.Type, provider.ErrNotSupported)
	}
	return &qpSetup{c: c, a: a}, nil
}

// qpSetup is CreateQP's setup, the response buffer inside it: one
// allocation where a SetupFunc, its closure and the buffer were three.
type qpSetup struct {
	c    *Context
	a    provider.QPAttr
	resp abi.SiwUrespCreateQp
}

// Udata is the response buffer.
func (s *qpSetup) Udata() (in, out []byte) { return nil, abi.Bytes(&s.resp) }

// Complete maps the queues and returns the QP.
func (s *qpSetup) Complete(cr provider.QPCreated) (provider.QP, error) {
	return s.c.newQP(s.a, cr, s.resp)
}

// Abort does nothing: the setup holds no resource.
func (s *qpSetup) Abort() {}

func (c *Context) newQP(a provider.QPAttr, cr provider.QPCreated, resp abi.SiwUrespCreateQp) (*QP, error) {
	sq, err := mapRing(c.f, "send queue", resp.SqKey, resp.NumSqe, sqeSize, 0)
	if err != nil {
		return nil, err
	}
	qp := &QP{c: c, handle: cr.Handle, qpn: cr.QPN, sigAll: a.SignalAll, db: writedoorbell.New(cr.Handle)}
	qp.sq = sendQueue{mu: queuelock.Mutex{Off: a.SingleThreaded}, r: sq, caps: provider.SendQueueCaps{Type: a.Type,
		MaxSGE: min(cr.Cap.MaxSendSGE, abi.SIW_MAX_SGE), MaxInline: min(cr.Cap.MaxInlineData, abi.SIW_MAX_INLINE)}}
	if a.SRQ == nil {
		rq, err := mapRing(c.f, "receive queue", resp.RqKey, resp.NumRqe, rqeSize, 0)
		if err != nil {
			sq.close()
			return nil, err
		}
		qp.rq = &recvQueue{c: c, r: rq, maxSGE: min(cr.Cap.MaxRecvSGE, abi.SIW_MAX_SGE)}
		qp.rq.mu.off = a.SingleThreaded // an SRQ's queue, shared, keeps its lock
	}
	return qp, nil
}

// QP is a siw queue pair: its send and receive rings are kernel memory
// mapped from the command file. PostSend and PostRecv are safe for
// concurrent use (a lock per ring, held while the list is checked and
// written, and across the doorbell write; see the package doc), unless it
// is single-threaded. Modified may run concurrently with both.
type QP struct {
	c      *Context
	handle uint32
	qpn    uint32
	sigAll bool
	state  atomic.Uint32 // provider.QPState, as MODIFY_QP left it
	sq     sendQueue
	rq     *recvQueue // nil when the QP uses an SRQ
	db     *writedoorbell.Doorbell
}

var _ provider.QP = (*QP)(nil)

type sendQueue struct {
	mu   queuelock.Mutex // off on a single-threaded QP
	r    *ring
	put  uint32 // next entry to write; we are the only producer
	caps provider.SendQueueCaps
}

// State is the QP state the provider last heard of through Modified. On
// iWARP the kernel's connection manager moves the QP to RTS without a
// MODIFY_QP from user space: State stays INIT then.
func (qp *QP) State() provider.QPState { return provider.QPState(qp.state.Load()) }

// Modified records the state MODIFY_QP moved the QP to. A QP in ERR
// stays there, as siw's does: siw_qp_modify ignores every transition out
// of ERR (a RESET succeeds and changes nothing), so the provider keeps
// refusing requests that would never complete.
func (qp *QP) Modified(s provider.QPState) {
	for {
		old := qp.state.Load()
		if provider.QPState(old) == provider.QPStateErr || qp.state.CompareAndSwap(old, uint32(s)) {
			return
		}
	}
}

// Caps reports the limits PostSend and PostRecv enforce.
func (qp *QP) Caps() (maxSendSGE, maxInline, maxRecvSGE uint32) {
	if qp.rq != nil {
		maxRecvSGE = qp.rq.maxSGE
	}
	return qp.sq.caps.MaxSGE, qp.sq.caps.MaxInline, maxRecvSGE
}

// PostSend checks every request, then writes them all into the send ring,
// each made valid by one atomic store of its flags word, and rings the
// doorbell if the kernel may be idle (the doorbell rule in the package
// doc). A refused list (a *WRError) leaves the ring as it was. It
// allocates nothing unless it fails.
//
// The common call, one SEND or RDMA WRITE that provider.SendOK passes,
// not inline, is written here without a further call but the doorbell's
// (issue 16: libsiw's cost): if the queue's mutex is free (TryLock), the
// queue open, the device there, the QP neither in RESET nor in ERR and the
// next entry ours, it writes the entry, stores its flags word and, by the
// doorbell rule, returns or rings (kick). Anything else (a list, another
// opcode, inline data, a held mutex, any refusal) goes to postSend, which
// waits for the mutex, checks everything again and answers with the
// error: the fast path refuses nothing itself.
func (qp *QP) PostSend(wrs []provider.SendWR) (int, error) {
	if len(wrs) != 1 {
		return qp.postSend(wrs)
	}
	wr := &wrs[0]
	sq := &qp.sq
	if 1<<wr.Opcode&plainOps == 0 || wr.Flags&provider.SendInline != 0 || !provider.SendOK(&sq.caps, wr) {
		return qp.postSend(wrs)
	}
	if !sq.mu.TryLock() {
		return qp.postSend(wrs) // postSend waits for the mutex
	}
	// Every way out below is a return (a tail call, or constants after
	// Unlock): nothing is live across a call, so nothing is spilled.
	r := sq.r
	if r == nil {
		goto slow
	}
	if qp.c.lost.Load() {
		goto slow
	}
	if st := qp.State(); st == provider.QPStateReset || st == provider.QPStateErr {
		goto slow
	}
	{
		put := sq.put
		e, w := r.sendEntry(put)
		if w.Load()&flagWord(abi.SIW_WQE_VALID, 0, 0) != 0 { // still the kernel's: full
			goto slow
		}
		e.Id = wr.ID
		op, rkey, raddr := uint8(abi.SIW_OP_WRITE), wr.RKey, wr.RemoteAddr
		if wr.Opcode == provider.WRSend {
			op, rkey, raddr = abi.SIW_OP_SEND, 0, 0
		}
		e.Rkey = rkey
		e.SetRaddr(raddr)
		flags := uint16(abi.SIW_WQE_VALID)
		if wr.Flags&provider.SendSignaled != 0 || qp.sigAll {
			flags |= abi.SIW_WQE_SIGNALLED
		}
		if wr.Flags&provider.SendSolicited != 0 {
			flags |= abi.SIW_WQE_SOLICITED
		}
		if wr.Flags&provider.SendFence != 0 {
			flags |= abi.SIW_WQE_READ_FENCE
		}
		sgl := wr.SGL
		sges := sqeSGEs(e)[:len(sgl)] // at most MaxSGE <= SIW_MAX_SGE (SendOK)
		var length uint64
		for j := range sges {
			s := &sgl[j]
			sges[j] = abi.SiwSge{Laddr: s.Addr, Length: s.Length, Lkey: s.LKey}
			length += uint64(s.Length)
		}
		w.Store(flagWord(flags, uint8(len(sgl)), op)) // publishes the entry
		// The doorbell rule: see postSend.
		_, prev := r.sendEntry(put - 1)
		kick := r.n == 1 || prev.Load()&flagWord(abi.SIW_WQE_VALID, 0, 0) == 0
		sq.put = put + 1
		if kick {
			return qp.ring(r, put, wrs, length)
		}
		sq.mu.Unlock()
		return 1, nil
	}
slow:
	sq.mu.Unlock()
	return qp.postSend(wrs)
}

// postSend is PostSend but for its one-request fast path.
func (qp *QP) postSend(wrs []provider.SendWR) (int, error) {
	if len(wrs) == 0 {
		return 0, nil
	}
	sq := &qp.sq
	sq.mu.Lock() // unlocked on every return, without a defer (PostSend's cost)
	r := sq.r
	if r == nil || r.mem == nil {
		sq.mu.Unlock()
		return 0, &WRError{Provider: "siw", Verb: "PostSend", Opcode: wrs[0].Opcode, Err: fmt.Errorf("the QP is %w", provider.ErrClosed)}
	}
	if qp.c.lost.Load() {
		sq.mu.Unlock()
		return 0, &WRError{Provider: "siw", Verb: "PostSend", Opcode: wrs[0].Opcode, Err: errDeviceLost}
	}
	switch st := qp.State(); st {
	case provider.QPStateReset:
		sq.mu.Unlock()
		return 0, &WRError{Provider: "siw", Verb: "PostSend", Opcode: wrs[0].Opcode,
			Err: provider.Invalid("the QP is in state RESET; sends need RTS")}
	case provider.QPStateErr:
		sq.mu.Unlock()
		return 0, &WRError{Provider: "siw", Verb: "PostSend", Opcode: wrs[0].Opcode,
			Err: provider.Invalid("the QP is in the error state: siw flushes its mapped send queue only when the QP enters ERR, so a request posted now would never complete")}
	}
	for i := range wrs {
		if wr := &wrs[i]; provider.SendOK(&sq.caps, wr) && 1<<wr.Opcode&plainOps != 0 { // inlined: a SEND or WRITE
			continue
		}
		if err := qp.checkSend(i, &wrs[i]); err != nil {
			sq.mu.Unlock()
			return i, err
		}
	}
	put := sq.put
	if uint32(len(wrs)) > r.n {
		err := qp.full(int(r.n), wrs) // reads the ring: before the unlock
		sq.mu.Unlock()
		return int(r.n), err
	}
	for i := range wrs {
		if r.word(put+uint32(i), offFlags).Load()&wqeValid != 0 { // still the kernel's
			err := qp.full(i, wrs)
			sq.mu.Unlock()
			return i, err
		}
	}
	// A list that would have the kernel send more than
	// writedoorbell.RawMax in one doorbell's run goes in parts: each
	// part written, then kicked (kickPart) before the next is written,
	// so that every doorbell but one for a single larger request is a
	// raw syscall (see rxe's ringPart: a long regular one hands the
	// thread's P off on Linux 6.1, where siw sends inside the write).
	var out uint64
	start := 0
	for i := range wrs {
		n := sendBytes(&wrs[i])
		if out > 0 && out+n > writedoorbell.RawMax {
			if k, err := qp.kickPart(r, put, start, wrs[start:i], out); err != nil {
				sq.put = put + uint32(start+k)
				sq.mu.Unlock()
				return start + k, err
			}
			start, out = i, 0
		}
		qp.fillSend(r, put+uint32(i), &wrs[i])
		out += n
	}
	k, err := qp.kickPart(r, put, start, wrs[start:], out)
	sq.put = put + uint32(start+k)
	sq.mu.Unlock()
	return start + k, err
}

// sendBytes is what the kernel sends for wr in its doorbell's run: its
// length, but nothing for an RDMA READ (its request only; the response
// comes in on the receive side).
func sendBytes(wr *provider.SendWR) uint64 {
	if wr.Opcode == provider.WRRDMARead {
		return 0
	}
	var n uint64
	for _, s := range wr.SGL {
		n += uint64(s.Length)
	}
	return n
}

// kickPart applies the doorbell rule to part, the requests just written at
// put+start (of a list written at put), which send out bytes, and rings if
// the kernel may be idle; the send queue's lock is held throughout. It
// returns how many of part stay posted and, for a refused doorbell, the
// error (see refused).
//
// The kernel takes entries in order while its send queue processing runs
// (siw_activate_tx clears an entry's flags when it takes it) and stops at
// the first entry that is not valid. If the entry before the part's is
// still valid the kernel has yet to reach it and will go on to the part:
// no doorbell. Otherwise it may be idle: ring. The part's flags were
// stored before this load (both sequentially consistent), so either we
// see the kernel's clear or it sees our entry.
func (qp *QP) kickPart(r *ring, put uint32, start int, part []provider.SendWR, out uint64) (int, error) {
	at := put + uint32(start)
	if uint32(len(part)) != r.n && r.word(at-1, offFlags).Load()&wqeValid != 0 {
		return len(part), nil
	}
	if err := writedoorbell.Ring(qp.c.f, qp.db, out); err != nil {
		return qp.refused(r, put, start, part, err)
	}
	return len(part), nil
}

// ring writes the doorbell for the requests wrs, of out bytes, that
// PostSend placed at put and unlocks the send queue. A refused doorbell
// takes them back if the kernel owns none of them (a *WRError), or says
// they stay posted (a *DoorbellError).
func (qp *QP) ring(r *ring, put uint32, wrs []provider.SendWR, out uint64) (int, error) {
	sq := &qp.sq
	var err error
	if out <= writedoorbell.RawMax {
		err = qp.c.f.Doorbell(qp.db.Cmd[:])
	} else {
		err = qp.c.f.Write(qp.db.Cmd[:])
	}
	if err == nil {
		sq.mu.Unlock()
		return len(wrs), nil
	}
	n, err := qp.refused(r, put, 0, wrs, err)
	if n == 0 {
		sq.put = put
	}
	sq.mu.Unlock()
	return n, err
}

// refused answers a doorbell the kernel refused (ENOTCONN: the kernel's QP
// is not in RTS; ErrClosed) for part, the requests at put+start of a list
// written at put: it takes them back if the kernel owns none of them (0
// and a *WRError), or says they stay posted (all of part and a
// *DoorbellError counting the list's earlier parts too).
func (qp *QP) refused(r *ring, put uint32, start int, part []provider.SendWR, err error) (int, error) {
	if qp.withdraw(r, put+uint32(start), part) {
		return 0, &WRError{Provider: "siw", Verb: "PostSend", Index: start, Opcode: part[0].Opcode,
			Err: fmt.Errorf("the kernel refused the doorbell: %w", err)}
	}
	return len(part), &DoorbellError{Provider: "siw", Posted: start + len(part), Err: err}
}

// withdraw clears the flags words PostSend stored, last first, each only
// if it still holds what was stored (a compare-and-swap: an entry the
// kernel took has its flags cleared). It reports whether all came back.
func (qp *QP) withdraw(r *ring, put uint32, wrs []provider.SendWR) bool {
	for i := len(wrs) - 1; i >= 0; i-- {
		w := r.word(put+uint32(i), offFlags)
		if v := w.Load(); v&wqeValid == 0 || !w.CompareAndSwap(v, 0) {
			return false
		}
	}
	return true
}

func (qp *QP) full(i int, wrs []provider.SendWR) error {
	return &WRError{Provider: "siw", Verb: "PostSend", Index: i, Opcode: wrs[i].Opcode,
		Err: fmt.Errorf("%w: the send queue is full (%d entries, %d requests in the list)", unix.ENOMEM, qp.sq.r.n, len(wrs))}
}

// plainOps are the opcodes with no rule of siw's own beyond
// provider.CheckSend's: PostSend takes them when provider.SendOK does,
// and calls checkSend for any other.
const plainOps = 1<<provider.WRSend | 1<<provider.WRRDMAWrite

// errNoOp is an opcode siw cannot carry.
func errNoOp(op provider.WROpcode, why string) error {
	return fmt.Errorf("%w: siw cannot carry %v (%s)", provider.ErrNotSupported, op, why)
}

// checkSend runs provider.CheckSend, then siw's own rules: the opcodes
// the user-mapped send queue carries (SEND, SEND_WITH_INV, RDMA_WRITE,
// RDMA_READ), inline on SEND and RDMA_WRITE only, an RDMA READ with one
// local SGE at most and without the fence flag (siw_activate_tx refuses
// both, and a refused entry would stay in the queue forever).
func (qp *QP) checkSend(i int, wr *provider.SendWR) error {
	err := provider.CheckSend(&qp.sq.caps, wr)
	if err == nil {
		switch wr.Opcode {
		case provider.WRSend, provider.WRRDMAWrite, provider.WRSendWithInv:
			if wr.Flags&provider.SendInline != 0 && wr.Opcode == provider.WRSendWithInv {
				err = provider.Invalid("siw carries inline data on SEND and RDMA_WRITE only")
			}
		case provider.WRRDMARead:
			switch {
			case len(wr.SGL) > 1:
				err = provider.Invalid("an iWARP RDMA READ writes into one local SGE; %d given", len(wr.SGL))
			case wr.Flags&provider.SendFence != 0:
				err = provider.Invalid("siw cannot fence an RDMA READ (siw_activate_tx refuses it)")
			}
		case provider.WRSendWithImm, provider.WRRDMAWriteWithImm:
			err = errNoOp(wr.Opcode, "iWARP (RFC 5040) has no immediate data")
		case provider.WRAtomicCmpAndSwp, provider.WRAtomicFetchAndAdd:
			err = errNoOp(wr.Opcode, "siw implements no atomics")
		case provider.WRLocalInv, provider.WRBindMW:
			err = errNoOp(wr.Opcode, "siw takes local invalidation, registration and binds from kernel clients only")
		}
	}
	if err != nil {
		return &WRError{Provider: "siw", Verb: "PostSend", Index: i, Opcode: wr.Opcode, Err: err}
	}
	return nil
}

// fillSend writes wr into send entry i and makes it valid.
func (qp *QP) fillSend(r *ring, i uint32, wr *provider.SendWR) {
	e := r.sqe(i)
	e.Id = wr.ID
	e.Rkey = 0
	e.SetRaddr(0)
	flags := uint16(abi.SIW_WQE_VALID)
	if wr.Flags&provider.SendSignaled != 0 || qp.sigAll {
		flags |= abi.SIW_WQE_SIGNALLED
	}
	if wr.Flags&provider.SendSolicited != 0 {
		flags |= abi.SIW_WQE_SOLICITED
	}
	if wr.Flags&provider.SendFence != 0 {
		flags |= abi.SIW_WQE_READ_FENCE
	}
	var op uint8
	switch wr.Opcode {
	case provider.WRSend:
		op = abi.SIW_OP_SEND
	case provider.WRSendWithInv:
		op = abi.SIW_OP_SEND_REMOTE_INV
		e.Rkey = wr.InvalidateRKey
	case provider.WRRDMAWrite:
		op = abi.SIW_OP_WRITE
		e.Rkey = wr.RKey
		e.SetRaddr(wr.RemoteAddr)
	case provider.WRRDMARead:
		op = abi.SIW_OP_READ
		e.Rkey = wr.RKey
		e.SetRaddr(wr.RemoteAddr)
	}
	sges := sqeSGEs(e)
	n := uint8(len(wr.SGL))
	if wr.Flags&provider.SendInline != 0 {
		var length uint32
		for _, s := range wr.SGL {
			length += s.Length
		}
		// The bytes follow sge[0], whose length is their count; the
		// kernel points sge[0] at them (siw_activate_tx).
		dst := sqeInline(e)
		off := 0
		for _, s := range wr.SGL {
			off += copy(dst[off:], usermem.Bytes(s.Addr, int(s.Length)))
		}
		sges[0] = abi.SiwSge{Length: length}
		flags |= abi.SIW_WQE_INLINE
		n = 1
	} else {
		for j, s := range wr.SGL {
			sges[j] = abi.SiwSge{Laddr: s.Addr, Length: s.Length, Lkey: s.LKey}
		}
		if wr.Opcode == provider.WRRDMARead && n == 0 {
			// siw reads into sge[0] whatever num_sge says: a
			// zero-length READ with an empty SGE.
			sges[0] = abi.SiwSge{}
			n = 1
		}
	}
	r.word(i, offFlags).Store(flagWord(flags, n, op)) // publishes the entry
}

// PostRecv writes the requests into the receive ring (see recvQueue.post).
// No syscall: siw takes receive entries from the ring when data arrives.
//
// The common call, one request of one SGE, is written here without a
// further call (issue 16: libsiw's cost): if the queue's lock is free
// (spinLock.tryLock), the queue open, the device there, the QP not in ERR,
// the SGE within the limits and the next entry ours, it writes the entry
// and stores its flags word. Anything else (a list, another SGE count, a
// held lock, any refusal) goes to recvQueue.post, which waits for the
// lock, checks everything again and answers with the error: the fast path
// refuses nothing itself.
func (qp *QP) PostRecv(wrs []provider.RecvWR) (int, error) {
	rq := qp.rq
	if rq == nil || len(wrs) != 1 {
		return qp.postRecv(wrs)
	}
	wr := &wrs[0]
	sgl := wr.SGL
	if len(sgl) != 1 || !rq.mu.tryLock() {
		return qp.postRecv(wrs) // tryLock failed: post waits for the lock
	}
	// Every way out below is a return (a tail call, or constants after
	// unlock): nothing is live across a call, so nothing is spilled.
	// Each check is an if of its own: the compiler turns a chain of ||
	// into a boolean it then tests.
	s := &sgl[0]
	r := rq.r
	if r == nil {
		goto slow
	}
	if rq.maxSGE == 0 {
		goto slow
	}
	if s.Length > maxRecvBytes {
		goto slow
	}
	if rq.c.lost.Load() {
		goto slow
	}
	if provider.QPState(qp.state.Load()) == provider.QPStateErr {
		goto slow
	}
	{
		put := rq.put
		e, flags := r.recvEntry(put)
		if flags.Load()&flagWord(abi.SIW_WQE_VALID, 0, 0) != 0 { // acquire: the kernel is done with a clear entry
			goto slow
		}
		e.Id = wr.ID
		e.Sge[0] = abi.SiwSge{Laddr: s.Addr, Length: s.Length, Lkey: s.LKey}
		doorbell.Publish32(flags, flagWord(abi.SIW_WQE_VALID, 1, 0)) // release: id and SGE first
		rq.put = put + 1
		rq.mu.unlock()
		return 1, nil
	}
slow:
	rq.mu.unlock()
	return qp.postRecv(wrs)
}

// postRecv is PostRecv but for its one-request fast path.
func (qp *QP) postRecv(wrs []provider.RecvWR) (int, error) {
	if qp.rq == nil {
		if len(wrs) == 0 {
			return 0, nil
		}
		return 0, errRecvOnSRQ
	}
	return qp.rq.post("PostRecv", wrs, &qp.state)
}

// The refusals of PostRecv that name no request (preallocated: they are
// the same every time).
var (
	errRecvOnSRQ = &WRError{Provider: "siw", Verb: "PostRecv", Err: provider.Invalid("the QP receives through an SRQ; post to the SRQ")}
	errRecvInErr = &WRError{Provider: "siw", Verb: "PostRecv",
		Err: provider.Invalid("the QP is in the error state: siw flushes its mapped receive queue only when the QP enters ERR, so a request posted now would never complete")}
)

// Close unmaps the rings; uverbs calls it after the kernel QP is destroyed.
func (qp *QP) Close() error {
	qp.sq.mu.Lock()
	r := qp.sq.r
	qp.sq.r = nil
	qp.sq.mu.Unlock()
	err := r.close()
	if qp.rq != nil {
		err = errors.Join(err, qp.rq.close())
	}
	return err
}

// recvQueue is a QP's receive ring or an SRQ's.
type recvQueue struct {
	c      *Context
	mu     spinLock // held from reading put to writing it back
	r      *ring
	put    uint32 // next entry to write; we are the only producer
	maxSGE uint32
}

// maxRecvBytes is the most bytes a receive's SGL may describe (2^31, the
// bound provider.CheckRecv enforces).
const maxRecvBytes = 1 << 31

// post writes wrs into the ring as siw's ownership rule asks, and no more.
//
// The rule (siw_rqe_get and siw_rq_flush in siw_qp_rx.c and siw_qp.c; libsiw's
// siw_post_recv): an entry whose flags word has SIW_WQE_VALID belongs to the
// kernel, any other to us. The kernel takes entries in order from its own
// index when a message arrives, reading the flags, then id, num_sge and the
// SGEs, and hands the entry back by clearing the flags with a full barrier
// (smp_store_mb) after its last read. It needs no doorbell: a receive it
// does not find is the peer's error, not a wake-up to wait for. So a post
// needs, per entry, an acquire load of the flags (ours only if clear: the
// kernel's reads of the old contents come before our writes of the new)
// and a release store of the flags (our writes of the contents come before
// the kernel can see the entry valid); nothing orders one entry against
// another, and there is no Dekker pattern with the kernel (unlike the send
// queue's doorbell rule), so nothing stronger. Go's sync/atomic has no
// release-only store (its Store is one XCHG on amd64, a locked
// instruction); doorbell.Publish32 is one: on amd64 a compiler barrier and
// a plain MOVL, inlined (STLR on arm64), where a store-release in assembly
// (tried before) cost a call. The load is a plain MOV on amd64 (LDAR on
// arm64).
// The lock (spinLock) is the one concurrent posters need (two atomic
// read-modify-writes: the CAS that takes it, the exchange that frees it);
// held from reading put to writing it back.
//
// One pass over the list checks each request (provider.CheckRecv's rules,
// inline: at most maxSGE SGEs describing at most 2^31 bytes), checks that
// its entry is ours and writes id and SGEs (one SGE without a loop, as
// most receives have); a second loop stores the flags words, in order,
// only once the whole list passed (the last through the word the first
// pass already holds: a one-request list needs no second loop). A refused
// list hands nothing to the kernel: no flags word changes and put stays
// (the entries written are still ours, and the next post rewrites them).
func (rq *recvQueue) post(op string, wrs []provider.RecvWR, qpState *atomic.Uint32) (int, error) {
	if len(wrs) == 0 {
		return 0, nil
	}
	rq.mu.lock()
	r := rq.r
	if r == nil || r.mem == nil || rq.c.lost.Load() ||
		(qpState != nil && provider.QPState(qpState.Load()) == provider.QPStateErr) {
		rq.mu.unlock()
		return 0, rq.refused(op, qpState)
	}
	put := rq.put
	var last *atomic.Uint32 // the last entry's flags word
	for i := range wrs {
		wr := &wrs[i]
		if uint32(len(wr.SGL)) > rq.maxSGE {
			rq.mu.unlock()
			return i, &WRError{Provider: "siw", Verb: op, Index: i, Err: provider.CheckRecv(rq.maxSGE, wr)}
		}
		e, flags := r.recvEntry(put + uint32(i))
		if uint32(i) >= r.n || flags.Load()&wqeValid != 0 { // acquire: the kernel is done with a clear entry
			rq.mu.unlock()
			return i, rq.full(op, i, r.n, len(wrs))
		}
		e.Id = wr.ID
		var total uint64
		if len(wr.SGL) == 1 { // the common receive, without the loop
			s := &wr.SGL[0]
			e.Sge[0] = abi.SiwSge{Laddr: s.Addr, Length: s.Length, Lkey: s.LKey}
			total = uint64(s.Length)
		} else {
			sges := e.Sge[:len(wr.SGL)]
			for j := range sges {
				s := &wr.SGL[j]
				sges[j] = abi.SiwSge{Laddr: s.Addr, Length: s.Length, Lkey: s.LKey}
				total += uint64(s.Length)
			}
		}
		if total > maxRecvBytes {
			rq.mu.unlock()
			return i, &WRError{Provider: "siw", Verb: op, Index: i, Err: provider.CheckRecv(rq.maxSGE, wr)}
		}
		last = flags
	}
	n := len(wrs) - 1
	for i := range n {
		_, flags := r.recvEntry(put + uint32(i))
		doorbell.Publish32(flags, flagWord(abi.SIW_WQE_VALID, uint8(len(wrs[i].SGL)), 0)) // release: id and SGEs first
	}
	doorbell.Publish32(last, flagWord(abi.SIW_WQE_VALID, uint8(len(wrs[n].SGL)), 0)) // the last, in order
	rq.put = put + uint32(len(wrs))
	rq.mu.unlock()
	return len(wrs), nil
}

// refused is post's answer to a queue that takes nothing: closed, its
// device gone, or (qpState not nil) its QP in ERR.
func (rq *recvQueue) refused(op string, qpState *atomic.Uint32) error {
	rq.mu.lock()
	closed := rq.r == nil || rq.r.mem == nil
	rq.mu.unlock()
	switch {
	case closed:
		return &WRError{Provider: "siw", Verb: op, Err: fmt.Errorf("the queue is %w", provider.ErrClosed)}
	case rq.c.lost.Load():
		return &WRError{Provider: "siw", Verb: op, Err: errDeviceLost}
	}
	return errRecvInErr
}

func (rq *recvQueue) full(op string, i int, n uint32, wrs int) error {
	return &WRError{Provider: "siw", Verb: op, Index: i,
		Err: fmt.Errorf("%w: the receive queue is full (%d entries, %d requests in the list)", unix.ENOMEM, n, wrs)}
}

func (rq *recvQueue) close() error {
	rq.mu.lock()
	r := rq.r
	rq.r = nil
	rq.mu.unlock()
	return r.close()
}

// spinLock is a receive queue's lock (issue 16: PostRecv at libsiw's
// cost, and libsiw's lock is a spin lock too). Its critical sections are
// a few dozen instructions with no syscall and no allocation, so a poster
// that finds it held spins, yielding its P between tries, rather than
// parking. tryLock is one atomic read-modify-write (a CAS) and unlock a
// release store (package release: on amd64 a plain store, as libsiw's
// pthread_spin_unlock; an exchange until session 40), both inline, without
// the calls sync.Mutex's slow paths add to its caller (the values they
// keep live are spilled to the stack on every call). A single-threaded
// QP's receive queue has it off: every method then returns at once (the
// program orders the calls).
type spinLock struct {
	v   atomic.Uint32
	off bool
}

func (l *spinLock) tryLock() bool { return l.off || l.v.CompareAndSwap(0, 1) }

// lock waits for the lock: a few tries, then a runtime.Gosched between
// tries, so that a holder that lost its thread gets one back.
func (l *spinLock) lock() {
	for i := 0; !l.off; i++ {
		if l.v.Load() == 0 && l.v.CompareAndSwap(0, 1) {
			return
		}
		if i >= 4 {
			runtime.Gosched()
		}
	}
}

func (l *spinLock) unlock() {
	if !l.off {
		release.Store32(&l.v, 0)
	}
}
