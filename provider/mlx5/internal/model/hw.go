package model

import (
	"bytes"
	"runtime"
	"time"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/internal/kernel"
)

// Async event types (enum ib_event_type).
const (
	evCQErr           = 0
	evQPAccessErr     = 3
	evSRQLimitReached = 15
)

// step is one pass of the hardware over the device: arm doorbells, then
// every QP's queues. Called with f.mu held.
func (d *Device) step() bool {
	busy := false
	for _, u := range d.files {
		if u.ctx == nil {
			continue
		}
		for _, p := range u.ctx.pages() {
			if d.serviceArmRegister(p) {
				busy = true
			}
		}
	}
	for _, c := range d.cqs {
		if d.serviceArmRecord(c) {
			busy = true
		}
	}
	for _, s := range d.srqs {
		d.learnSRQ(s)
	}
	for _, q := range d.qps {
		if d.serviceQP(q) {
			busy = true
		}
	}
	return busy
}

// ---- CQ arming ----

// serviceArmRegister notices a new value in a UAR's CQ arm register:
// (arm word)<<32 | cqn, big-endian.
func (d *Device) serviceArmRegister(p *uarPage) bool {
	v := be.Uint64(p.reg(uarCQArm))
	if v == p.lastArm {
		return false
	}
	p.lastArm = v
	c := d.cqs[uint32(v)]
	if c == nil || c.uar != p {
		d.violation("CQ arm doorbell for CQ %d, which is not armed through this UAR", uint32(v))
		return true
	}
	w := uint32(v >> 32)
	if rec := be.Uint32(c.db[dbRecArm:]); rec != w {
		d.violation("CQ %d armed with %#x on the UAR but %#x in its doorbell record", c.cqn, w, rec)
	}
	c.lastArm = w
	d.stats.Arms++
	d.arm(c, w)
	return true
}

// serviceArmRecord notices a new arm word in a CQ's doorbell record and
// waits for the UAR write that must follow it.
func (d *Device) serviceArmRecord(c *mcq) bool {
	w := be.Uint32(c.db[dbRecArm:])
	if w == c.lastArm {
		return false
	}
	want := uint64(w)<<32 | uint64(c.cqn)
	deadline := time.Now().Add(d.o.DoorbellWait)
	for be.Uint64(c.uar.reg(uarCQArm)) != want {
		if time.Now().After(deadline) {
			c.lastArm = w
			d.stats.MissedArms++
			d.violation("CQ %d: arm word %#x in the doorbell record without the UAR write", c.cqn, w)
			return true
		}
		runtime.Gosched()
	}
	c.uar.lastArm = want
	c.lastArm = w
	d.stats.Arms++
	d.arm(c, w)
	return true
}

// arm handles an arm request: ignored unless its sequence number is the
// current one; then an event is raised at once if a CQE it asks for is
// already past the consumer index it names.
func (d *Device) arm(c *mcq, w uint32) {
	if (w>>28)&3 != c.armSN&3 {
		d.stats.StaleArms++
		return
	}
	c.armed, c.armSol = true, w&armSolBit != 0
	n := uint32(1) << c.log
	for i := w & 0xffffff; i&0xffffff != c.pi&0xffffff; i++ {
		off := int(i&(n-1))*c.cqeSize + c.cqeSize - cqe64
		op := c.buf[off+cOpOwn]
		if !c.armSol || op&2 != 0 || op>>4 == cqeReqErr || op>>4 == cqeRespErr {
			d.fire(c)
			return
		}
	}
}

// fire raises a completion event for c and disarms it.
func (d *Device) fire(c *mcq) {
	c.armed = false
	c.armSN++
	c.events++
	d.stats.Events++
	if c.ch != nil {
		var b [8]byte
		ne.PutUint64(b[:], c.userHandle)
		c.ch.send(b[:])
	}
}

func (d *Device) asyncEvent(ctx *ucontext, element uint64, typ uint32) {
	if ctx == nil || ctx.async == nil {
		return
	}
	ev := abi.IbUverbsAsyncEventDesc{Element: element, EventType: typ}
	ctx.async.send(abi.Bytes(&ev))
	d.stats.AsyncEvents++
}

// ---- CQEs ----

// writeCQE writes e (a 64-byte CQE without its owner bit) at the CQ's
// producer index, owner bit last, then raises an event if the CQ is armed
// for it.
func (d *Device) writeCQE(c *mcq, e *[cqe64]byte) {
	n := uint32(1) << c.log
	ci := be.Uint32(c.db[dbRecSetCI:]) & 0xffffff
	if (c.pi-ci)&0xffffff >= n {
		if !c.overflow {
			d.violation("CQ %d overrun: %d CQEs unconsumed in a CQ of %d", c.cqn, (c.pi-ci)&0xffffff, n)
			d.asyncEvent(c.ctx, c.userHandle, evCQErr)
		}
		c.overflow = true
		return
	}
	e[cOpOwn] = e[cOpOwn]&^1 | byte(c.pi>>c.log)&1
	off := int(c.pi&(n-1))*c.cqeSize + c.cqeSize - cqe64
	dst := c.buf[off : off+cqe64]
	copy(dst[:cWqeCounter], e[:cWqeCounter])
	storeWord(dst[cWqeCounter:], ne.Uint32(e[cWqeCounter:]))
	c.pi++
	d.stats.CQEs++
	op := e[cOpOwn]
	if c.armed && (!c.armSol || op&2 != 0 || op>>4 == cqeReqErr || op>>4 == cqeRespErr) {
		d.fire(c)
	}
}

func uidxOf(q *mqp) uint32 {
	if q.ctx.cqeVersion == 1 {
		return q.uidx
	}
	return 0
}

func (d *Device) reqCQE(q *mqp, w *wqe, n uint32) {
	var e [cqe64]byte
	be.PutUint32(e[cSrqnUidx:], uidxOf(q))
	be.PutUint32(e[cByteCnt:], n)
	be.PutUint32(e[cSopDropQpn:], uint32(w.opcode)<<24|q.qpn)
	be.PutUint16(e[cWqeCounter:], w.idx)
	e[cOpOwn] = cqeReq << 4
	d.writeCQE(q.scq, &e)
}

func (d *Device) reqErr(q *mqp, w *wqe, syndrome uint8) {
	var e [cqe64]byte
	be.PutUint32(e[cSrqnUidx:], uidxOf(q))
	e[cVendorErr] = 0x80 | syndrome
	e[cSyndrome] = syndrome
	be.PutUint32(e[cSopDropQpn:], uint32(w.opcode)<<24|q.qpn)
	be.PutUint16(e[cWqeCounter:], w.idx)
	e[cOpOwn] = cqeReqErr << 4
	d.writeCQE(q.scq, &e)
}

// recvSlot is a receive WQE the responder took.
type recvSlot struct {
	sges    []sge
	counter uint16
	srq     *msrq
}

// respKey is what a responder CQE carries in srqn_uidx, as ConnectX writes
// it: with CQE version 1 the user index of the QP that received, whether
// the WQE came from its own receive queue or from a (basic) SRQ — only XRC
// SRQs have a user index of their own in a CQE, and the model has none;
// with version 0 the SRQ number for a receive through an SRQ, else 0.
// (rdma-core's get_resp_ctx_v1 looks the user index up as a QP and takes
// the SRQ from the QP; __mlx5_cq_clean matches a QP's CQEs by it.)
func respKey(q *mqp, r *recvSlot) uint32 {
	switch {
	case q.ctx.cqeVersion == 1:
		return q.uidx
	case r.srq != nil:
		return r.srq.srqn
	}
	return 0
}

func (d *Device) respErr(q *mqp, r *recvSlot, syndrome uint8) {
	var e [cqe64]byte
	be.PutUint32(e[cSrqnUidx:], respKey(q, r))
	e[cVendorErr] = 0x80 | syndrome
	e[cSyndrome] = syndrome
	be.PutUint32(e[cSopDropQpn:], q.qpn)
	be.PutUint16(e[cWqeCounter:], r.counter)
	e[cOpOwn] = cqeRespErr << 4
	d.writeCQE(q.rcq, &e)
}

func (d *Device) respCQE(q *mqp, r *recvSlot, op uint8, n, imm uint32, src *mqp, grh, solicited bool, sl uint8) {
	var e [cqe64]byte
	be.PutUint32(e[cSrqnUidx:], respKey(q, r))
	be.PutUint32(e[cImm:], imm)
	be.PutUint32(e[cByteCnt:], n)
	be.PutUint32(e[cSopDropQpn:], q.qpn)
	be.PutUint16(e[cWqeCounter:], r.counter)
	fr := src.qpn&0xffffff | uint32(sl&0xf)<<24
	if grh {
		fr |= 1 << 28
	}
	be.PutUint32(e[cFlagsRqpn:], fr)
	be.PutUint16(e[cSlid:], src.dev().lid)
	e[cOpOwn] = op << 4
	if solicited {
		e[cOpOwn] |= 2
	}
	d.writeCQE(q.rcq, &e)
}

func (q *mqp) dev() *Device { return q.ctx.u.d }

// ---- QPs ----

// learnRQ notices receive WQEs posted since the last look.
func (d *Device) learnRQ(q *mqp) bool {
	if q.rqCnt == 0 {
		return false
	}
	cnt := be.Uint32(q.db[dbRecRecv:]) & 0xffff
	delta := (cnt - q.rqPI) & 0xffff
	if delta == 0 {
		return false
	}
	if q.rqPI+delta-q.rqCI > q.rqCnt {
		d.violation("QP %d: receive counter %d overruns the %d-WQE ring (consumed %d)", q.qpn, cnt, q.rqCnt, q.rqCI)
	}
	q.rqPI += delta
	return true
}

// learn brings a QP's producer counters up to its doorbell record without
// checking the send doorbell (MODIFY_QP to ERR flushes what was posted).
func (d *Device) learn(q *mqp) {
	d.learnRQ(q)
	if q.sqCnt > 0 {
		cnt := be.Uint32(q.db[dbRecSend:]) & 0xffff
		q.sqPI += (cnt - q.sqPI) & 0xffff
	}
}

func (d *Device) learnSRQ(s *msrq) bool {
	cnt := be.Uint32(s.db[dbRecRecv:]) & 0xffff
	delta := (cnt - s.pi) & 0xffff
	if delta == 0 {
		return false
	}
	if s.pi+delta-s.ci > s.cnt-1 {
		d.violation("SRQ %d: counter %d overruns the %d-WQE ring (consumed %d)", s.srqn, cnt, s.cnt, s.ci)
	}
	s.pi += delta
	return true
}

func (d *Device) checkSRQLimit(s *msrq) {
	if s.armed && s.pi-s.ci < s.limit {
		s.armed = false
		s.events++
		d.asyncEvent(s.ctx, s.userHandle, evSRQLimitReached)
	}
}

func (d *Device) serviceQP(q *mqp) bool {
	if q.state == qpsReset {
		return false // the device ignores a reset QP's doorbell records
	}
	busy := d.learnRQ(q)
	if q.state == qpsErr && q.srq == nil && q.rqCI != q.rqPI {
		d.flush(q)
		busy = true
	}
	if q.sqCnt == 0 {
		return busy
	}
	if cnt := be.Uint32(q.db[dbRecSend:]) & 0xffff; cnt != q.sqPI&0xffff {
		d.sendDoorbell(q)
		busy = true
	}
	if q.sqCI != q.sqPI {
		switch q.state {
		case qpsRTS:
			if d.runSQ(q) {
				busy = true
			}
		case qpsErr:
			d.flush(q)
			busy = true
		}
	}
	return busy
}

// wqeAt copies the WQE starting at WQEBB counter pos out of the send ring
// (undoing the wrap) and returns it with its DS.
func (q *mqp) wqeAt(pos uint32) ([]byte, uint32) {
	mask := q.sqCnt - 1
	first := q.sq[int(pos&mask)*bb:]
	ds := be.Uint32(first[wCtrlQpnDs:]) & 0x3f
	n := (ds*wSeg + bb - 1) / bb
	if n == 0 {
		return first[:wSeg], 0
	}
	b := make([]byte, 0, n*bb)
	for i := uint32(0); i < n; i++ {
		o := int((pos+i)&mask) * bb
		b = append(b, q.sq[o:o+bb]...)
	}
	return b, ds
}

// sendDoorbell handles a send counter that moved: the WQEs up to it must
// end exactly there, and the UAR must show a doorbell naming the last one
// (its first 8 bytes, or all of it as a BlueFlame copy).
func (d *Device) sendDoorbell(q *mqp) {
	deadline := time.Now().Add(d.o.DoorbellWait)
	reported := map[uint32]bool{}
	for {
		cnt := be.Uint32(q.db[dbRecSend:]) & 0xffff
		pi := q.sqPI + (cnt-q.sqPI)&0xffff
		pos, last := q.sqPI, q.sqPI
		for pos != pi {
			b, ds := q.wqeAt(pos)
			if ds == 0 {
				d.violation("QP %d: WQE at %d has DS 0", q.qpn, pos)
				q.sqPI = pi
				return
			}
			if got := uint16(be.Uint32(b[wCtrlOpcode:]) >> 8); got != uint16(pos) && !reported[pos] {
				reported[pos] = true
				d.violation("QP %d: WQE at %d carries index %d", q.qpn, pos, got)
			}
			last = pos
			pos += (ds*wSeg + bb - 1) / bb
			if int32(pi-pos) < 0 {
				d.violation("QP %d: send counter %d is inside the WQE at %d", q.qpn, pi, last)
				q.sqPI = pi
				return
			}
		}
		if pi-q.sqCI > q.sqCnt {
			d.violation("QP %d: send counter %d overruns the %d-WQEBB ring (executed %d)", q.qpn, pi, q.sqCnt, q.sqCI)
		}
		if d.doorbellSeen(q, last) {
			q.sqPI = pi
			return
		}
		if time.Now().After(deadline) {
			d.stats.MissedDoorbells++
			d.violation("QP %d: send counter moved to %d without a doorbell naming WQE %d on its UAR", q.qpn, pi, last)
			q.sqPI = pi
			return
		}
		runtime.Gosched()
	}
}

// doorbellSeen looks for the doorbell of the WQE at pos on the QP's
// BlueFlame registers (both halves of each).
func (d *Device) doorbellSeen(q *mqp, pos uint32) bool {
	b, _ := q.wqeAt(pos)
	for _, r := range q.bfregs {
		for _, half := range []int{0, bfRegSize / 2} {
			reg := r.page.mem.Bytes()[r.off+half : r.off+half+bfRegSize/2]
			if !bytes.Equal(reg[:8], b[:8]) {
				continue
			}
			d.stats.Doorbells++
			if len(b) <= len(reg) {
				// A BlueFlame copy writes 8 bytes at a time in order:
				// give it a moment to land before judging.
				for i := 0; i < 100; i++ {
					if bytes.Equal(reg[:len(b)], b) {
						d.stats.BlueFlames++
						break
					}
					runtime.Gosched()
				}
			}
			return true
		}
	}
	return false
}

// sge is a data segment of a WQE.
type sge struct {
	n    uint32
	lkey uint32
	addr uint64
}

// av is a decoded UD address vector.
type av struct {
	qkey, dqpn uint32
	rlid       uint16
	grh        bool
	sgid       uint8
	rgid       [16]byte
	sl         uint8
	tclass     uint8
	hopLimit   uint8
	flow       uint32
}

// wqe is a decoded send WQE.
type wqe struct {
	pos     uint32
	bbs     uint32
	idx     uint16
	opcode  uint8
	fm      uint8
	imm     uint32
	raddr   uint64
	rkey    uint32
	swapAdd uint64
	compare uint64
	av      av
	inline  []byte
	isInl   bool
	sges    []sge
}

func (w *wqe) signaled() bool  { return w.fm&fmCQUpdate != 0 }
func (w *wqe) solicited() bool { return w.fm&fmSolicited != 0 }

// decode parses the WQE at pos from the documented segment layouts.
func (d *Device) decode(q *mqp, pos uint32) (wqe, bool) {
	b, ds := q.wqeAt(pos)
	w := wqe{pos: pos}
	if ds == 0 {
		d.violation("QP %d: WQE at %d has DS 0", q.qpn, pos)
		return w, false
	}
	size := int(ds) * wSeg
	w.bbs = uint32((size + bb - 1) / bb)
	oo := be.Uint32(b[wCtrlOpcode:])
	w.opcode, w.idx = uint8(oo), uint16(oo>>8)
	if qpn := be.Uint32(b[wCtrlQpnDs:]) >> 8; qpn != q.qpn {
		d.violation("QP %d: WQE at %d names QP %d", q.qpn, pos, qpn)
	}
	w.fm = b[wCtrlFm]
	w.imm = be.Uint32(b[wCtrlImm:])
	off := wSeg
	ok := true
	switch q.typ {
	case qptUD:
		ok = w.opcode == opSend || w.opcode == opSendImm
	case qptUC:
		ok = w.opcode == opSend || w.opcode == opSendImm || w.opcode == opWrite || w.opcode == opWriteImm
	case qptRC:
		switch w.opcode {
		case opSend, opSendImm, opSendInv, opWrite, opWriteImm, opRead, opCS, opFA:
		default:
			ok = false
		}
	}
	if !ok {
		d.violation("QP %d (type %d): WQE at %d has opcode %#x", q.qpn, q.typ, pos, w.opcode)
		return w, false
	}
	if q.typ == qptUD {
		if size < wSeg+wAVSize {
			d.violation("QP %d: UD WQE at %d too short for an address vector", q.qpn, pos)
			return w, false
		}
		a := b[off : off+wAVSize]
		dqp := be.Uint32(a[wAVDqp:])
		if dqp&0x80000000 == 0 {
			d.violation("QP %d: UD WQE at %d without the extended-AV bit", q.qpn, pos)
		}
		gf := be.Uint32(a[wAVGrhFl:])
		w.av = av{qkey: be.Uint32(a[wAVQkey:]), dqpn: dqp & 0xffffff, rlid: be.Uint16(a[wAVRlid:]), grh: gf&(1<<30) != 0,
			sgid: uint8(gf >> 20), flow: gf & 0xfffff, sl: a[wAVStatSL] & 0xf, tclass: a[wAVTclass], hopLimit: a[wAVHopLimit]}
		copy(w.av.rgid[:], a[wAVRgid:wAVRgid+16])
		off += wAVSize
	}
	switch w.opcode {
	case opWrite, opWriteImm, opRead, opCS, opFA:
		if off+wSeg > size {
			return w, false
		}
		w.raddr, w.rkey = be.Uint64(b[off+wRaddr:]), be.Uint32(b[off+wRkey:])
		off += wSeg
	}
	if w.opcode == opCS || w.opcode == opFA {
		if off+wSeg > size {
			return w, false
		}
		w.swapAdd, w.compare = be.Uint64(b[off+wSwapAdd:]), be.Uint64(b[off+wCompare:])
		off += wSeg
	}
	if off < size {
		if v := be.Uint32(b[off:]); v&inlineBit != 0 {
			n := int(v &^ inlineBit)
			if off+4+n > size {
				d.violation("QP %d: inline data of %d bytes overflows the %d-byte WQE at %d", q.qpn, n, size, pos)
				return w, false
			}
			w.isInl, w.inline = true, append([]byte(nil), b[off+4:off+4+n]...)
		} else {
			for ; off+wSeg <= size; off += wSeg {
				w.sges = append(w.sges, sge{n: be.Uint32(b[off+wByteCount:]), lkey: be.Uint32(b[off+wLkey:]), addr: be.Uint64(b[off+wAddr:])})
			}
		}
	}
	return w, true
}

// result is what executing a WQE came to.
type result struct {
	syndrome uint8 // requester error, 0 for success
	n        uint32
	rnr      bool // the responder had no receive WQE: retry
}

// runSQ executes the QP's posted WQEs in order, stopping at an RNR wait.
func (d *Device) runSQ(q *mqp) bool {
	did := false
	for q.sqCI != q.sqPI && q.state == qpsRTS {
		if !q.rnrUntil.IsZero() && time.Now().Before(q.rnrUntil) {
			return did
		}
		w, ok := d.decode(q, q.sqCI)
		if !ok {
			if w.bbs == 0 {
				w.bbs = 1
			}
			q.sqCI += w.bbs
			d.reqErr(q, &w, synLocalQPOp)
			d.toError(q)
			return true
		}
		if q.sigAll && !w.signaled() {
			d.violation("QP %d signals every send, its WQE at %d lacks CQ_UPDATE", q.qpn, w.pos)
		}
		r := d.execute(q, &w)
		if r.rnr {
			d.stats.RNRNaks++
			q.rnrTries++
			if q.rnrRetry == 7 || q.rnrTries <= int(q.rnrRetry) {
				q.rnrUntil = time.Now().Add(time.Duration(q.minRNR+1) * 100 * time.Microsecond)
				return did
			}
			r = result{syndrome: synRNRRetryExc}
		}
		q.rnrTries, q.rnrUntil = 0, time.Time{}
		q.sqCI += w.bbs
		d.stats.WQEs++
		did = true
		if r.syndrome != 0 {
			d.reqErr(q, &w, r.syndrome)
			d.toError(q)
			return true
		}
		if w.signaled() {
			d.reqCQE(q, &w, r.n)
		}
	}
	return did
}

// toError moves a QP to the error state and flushes it.
func (d *Device) toError(q *mqp) {
	q.state = qpsErr
	d.flush(q)
}

// flush completes every posted WQE of an errored QP with a flush error.
func (d *Device) flush(q *mqp) {
	for q.sqCI != q.sqPI {
		w, ok := d.decode(q, q.sqCI)
		if !ok && w.bbs == 0 {
			w.bbs = 1
		}
		d.reqErr(q, &w, synFlush)
		q.sqCI += w.bbs
		d.stats.WQEs++
		d.stats.Flushed++
	}
	if q.srq == nil {
		for q.rqCI != q.rqPI {
			d.respErr(q, &recvSlot{counter: uint16(q.rqCI)}, synFlush)
			q.rqCI++
			d.stats.Flushed++
		}
	}
	q.rnrTries, q.rnrUntil = 0, time.Time{}
}

// ---- memory ----

const (
	accLocalWrite   = abi.IB_UVERBS_ACCESS_LOCAL_WRITE
	accRemoteWrite  = abi.IB_UVERBS_ACCESS_REMOTE_WRITE
	accRemoteRead   = abi.IB_UVERBS_ACCESS_REMOTE_READ
	accRemoteAtomic = abi.IB_UVERBS_ACCESS_REMOTE_ATOMIC
)

// local resolves n bytes at I/O address addr of the MR with lkey, in the
// QP's PD.
func (d *Device) local(q *mqp, lkey uint32, addr uint64, n uint32, write bool) ([]byte, bool) {
	if n == 0 {
		return nil, true
	}
	m := d.mrs[lkey]
	if m == nil || m.pd != q.pd || write && m.access&accLocalWrite == 0 {
		return nil, false
	}
	if addr < m.iova || addr-m.iova+uint64(n) > m.length {
		return nil, false
	}
	return kernel.UserMemory(m.start+(addr-m.iova), int(n)), true
}

// remote resolves n bytes at addr of the MR with rkey on the responder QP,
// which must grant access both in the MR and in its own access flags.
func (d *Device) remote(q *mqp, rkey uint32, addr uint64, n uint32, access uint32) ([]byte, bool) {
	m := d.mrs[rkey]
	if m == nil || m.pd != q.pd || m.access&access == 0 || q.access&access == 0 {
		return nil, false
	}
	if addr < m.iova || addr-m.iova+uint64(n) > m.length {
		return nil, false
	}
	if n == 0 {
		return nil, true
	}
	return kernel.UserMemory(m.start+(addr-m.iova), int(n)), true
}

// gather reads a WQE's data: inline bytes or its SGEs' memory.
func (d *Device) gather(q *mqp, w *wqe) ([]byte, bool) {
	if w.isInl {
		return w.inline, true
	}
	var data []byte
	for _, s := range w.sges {
		b, ok := d.local(q, s.lkey, s.addr, s.n, false)
		if !ok {
			return nil, false
		}
		data = append(data, b...)
	}
	return data, true
}

// scatter writes skip bytes of nothing, then prefix, then data into a
// receive WQE's SGEs; syndrome 0 on success.
func (d *Device) scatter(q *mqp, sges []sge, skip int, prefix, data []byte) uint8 {
	total := 0
	for _, s := range sges {
		total += int(s.n)
	}
	if skip+len(prefix)+len(data) > total {
		return synLocalLen
	}
	src := append(append(make([]byte, 0, skip+len(prefix)+len(data)), make([]byte, skip)...), prefix...)
	src = append(src, data...)
	pos := 0
	for _, s := range sges {
		if pos >= len(src) {
			break
		}
		n := min(int(s.n), len(src)-pos)
		b, ok := d.local(q, s.lkey, s.addr, uint32(n), true)
		if !ok {
			return synLocalProt
		}
		lo := pos
		if pos < skip {
			lo = min(skip, pos+n)
		}
		copy(b[lo-pos:], src[lo:pos+n])
		pos += n
	}
	return 0
}

// takeRecv takes the next receive WQE of q (from its SRQ if it has one).
func (d *Device) takeRecv(q *mqp) (*recvSlot, bool) {
	parse := func(w []byte) []sge {
		var ss []sge
		for off := 0; off+wSeg <= len(w); off += wSeg {
			s := sge{n: be.Uint32(w[off+wByteCount:]), lkey: be.Uint32(w[off+wLkey:]), addr: be.Uint64(w[off+wAddr:])}
			if s.lkey == invalidLKey {
				break
			}
			ss = append(ss, s)
		}
		return ss
	}
	if s := q.srq; s != nil {
		d.learnSRQ(s)
		if s.ci == s.pi {
			return nil, false
		}
		h := s.head
		w := s.buf[int(h<<s.shift):int((h+1)<<s.shift)]
		s.head = uint32(be.Uint16(w[wSRQNext:])) & (s.cnt - 1)
		s.ci++
		d.stats.RecvWQEs++
		d.checkSRQLimit(s)
		return &recvSlot{sges: parse(w[wSeg:]), counter: uint16(h), srq: s}, true
	}
	d.learnRQ(q)
	if q.rqCI == q.rqPI || q.rqCnt == 0 {
		return nil, false
	}
	i := q.rqCI & (q.rqCnt - 1)
	w := q.rq[int(i<<q.rqShift):int((i+1)<<q.rqShift)]
	r := &recvSlot{sges: parse(w), counter: uint16(q.rqCI)}
	q.rqCI++
	d.stats.RecvWQEs++
	return r, true
}

// ---- transport ----

func (f *Fabric) route(global bool, dgid [16]byte, dlid uint16) *Device {
	for _, dv := range f.devs {
		if global {
			for _, g := range dv.gids {
				if g == dgid {
					return dv
				}
			}
		} else if dv.lid == dlid {
			return dv
		}
	}
	return nil
}

// peer is the connected QP a RC or UC QP's packets reach, if any: routed
// by the QP's address, of the same type, able to receive, and connected
// back to q.
func (d *Device) peer(q *mqp) *mqp {
	dv := d.f.route(q.av.global, q.av.dgid, q.av.dlid)
	if dv == nil {
		return nil
	}
	p := dv.qps[q.destQPN]
	if p == nil || p.typ != q.typ || p.destQPN != q.qpn || p.state != qpsRTR && p.state != qpsRTS && p.state != qpsSQD {
		return nil
	}
	return p
}

// responderError moves an RC responder to the error state after a
// protocol error it detected (the IBTA's class C errors).
func (d *Device) responderError(p *mqp, ev uint32) {
	if p.typ != qptRC {
		return
	}
	p.events++
	d.asyncEvent(p.ctx, p.userHandle, ev)
	p.dev().toError(p)
}

// execute carries out one WQE of q; its effects on the responder (data,
// receive CQEs) happen here, synchronously.
func (d *Device) execute(q *mqp, w *wqe) result {
	rc := q.typ == qptRC
	var data []byte
	switch w.opcode {
	case opSend, opSendImm, opSendInv, opWrite, opWriteImm:
		var ok bool
		if data, ok = d.gather(q, w); !ok {
			return result{syndrome: synLocalProt}
		}
	}
	if q.typ == qptUD {
		d.sendUD(q, w, data)
		return result{}
	}
	p := d.peer(q)
	if p == nil {
		if rc {
			return result{syndrome: synRetryExc}
		}
		return result{} // UC: the packets are lost
	}
	pd := p.dev()
	switch w.opcode {
	case opSend, opSendImm, opSendInv:
		r, ok := pd.takeRecv(p)
		if !ok {
			if rc {
				return result{rnr: true}
			}
			return result{}
		}
		if syn := pd.scatter(p, r.sges, 0, nil, data); syn != 0 {
			pd.respErr(p, r, syn)
			pd.responderError(p, evQPAccessErr)
			if !rc {
				return result{}
			}
			if syn == synLocalLen {
				return result{syndrome: synRemoteInvReq}
			}
			return result{syndrome: synRemoteOp}
		}
		op := uint8(cqeRespSend)
		switch w.opcode {
		case opSendImm:
			op = cqeRespSendIm
		case opSendInv:
			op = cqeRespSendIv
		}
		pd.respCQE(p, r, op, uint32(len(data)), w.imm, q, false, w.solicited(), q.av.sl)
		return result{}
	case opWrite, opWriteImm:
		mem, ok := pd.remote(p, w.rkey, w.raddr, uint32(len(data)), accRemoteWrite)
		if !ok {
			if !rc {
				return result{}
			}
			pd.responderError(p, evQPAccessErr)
			return result{syndrome: synRemoteAccess}
		}
		var r *recvSlot
		if w.opcode == opWriteImm {
			if r, ok = pd.takeRecv(p); !ok {
				if rc {
					return result{rnr: true}
				}
				return result{}
			}
		}
		copy(mem, data)
		if r != nil {
			pd.respCQE(p, r, cqeRespWrImm, uint32(len(data)), w.imm, q, false, w.solicited(), q.av.sl)
		}
		return result{}
	case opRead:
		var n uint32
		for _, s := range w.sges {
			n += s.n
		}
		mem, ok := pd.remote(p, w.rkey, w.raddr, n, accRemoteRead)
		if !ok {
			pd.responderError(p, evQPAccessErr)
			return result{syndrome: synRemoteAccess}
		}
		src := append([]byte(nil), mem...)
		pos := uint32(0)
		for _, s := range w.sges {
			b, ok := d.local(q, s.lkey, s.addr, s.n, true)
			if !ok {
				return result{syndrome: synLocalProt}
			}
			copy(b, src[pos:pos+s.n])
			pos += s.n
		}
		return result{n: n}
	case opCS, opFA:
		if w.raddr%8 != 0 || len(w.sges) != 1 || w.sges[0].n != 8 {
			return result{syndrome: synRemoteInvReq}
		}
		mem, ok := pd.remote(p, w.rkey, w.raddr, 8, accRemoteAtomic)
		if !ok {
			pd.responderError(p, evQPAccessErr)
			return result{syndrome: synRemoteAccess}
		}
		dst, ok := d.local(q, w.sges[0].lkey, w.sges[0].addr, 8, true)
		if !ok {
			return result{syndrome: synLocalProt}
		}
		old := ne.Uint64(mem)
		if w.opcode == opCS {
			if old == w.compare {
				ne.PutUint64(mem, w.swapAdd)
			}
		} else {
			ne.PutUint64(mem, old+w.swapAdd)
		}
		ne.PutUint64(dst, old)
		return result{n: 8}
	}
	return result{syndrome: synLocalQPOp}
}

// grhLen is the size of the GRH a UD receive buffer starts with.
const grhLen = 40

// sendUD delivers a UD datagram: routed by the WQE's address vector, to a
// UD QP with the right Q_Key; lost (with no error) otherwise.
func (d *Device) sendUD(q *mqp, w *wqe, data []byte) {
	dv := d.f.route(w.av.grh, w.av.rgid, w.av.rlid)
	if dv == nil {
		return
	}
	p := dv.qps[w.av.dqpn]
	if p == nil || p.typ != qptUD || p.state != qpsRTR && p.state != qpsRTS && p.state != qpsSQD {
		return
	}
	qkey := w.av.qkey
	if qkey&0x80000000 != 0 {
		qkey = q.qkey
	}
	if qkey != p.qkey || len(data) > 4096 {
		return
	}
	r, ok := dv.takeRecv(p)
	if !ok {
		return
	}
	var grh []byte
	skip := grhLen
	if w.av.grh {
		grh = make([]byte, grhLen)
		be.PutUint32(grh[0:], 6<<28|uint32(w.av.tclass)<<20|w.av.flow)
		be.PutUint16(grh[4:], uint16(len(data)))
		grh[6], grh[7] = 0x1b, w.av.hopLimit
		copy(grh[8:24], d.gids[w.av.sgid%uint8(len(d.gids))][:])
		copy(grh[24:40], w.av.rgid[:])
		skip = 0
	}
	if syn := dv.scatter(p, r.sges, skip, grh, data); syn != 0 {
		dv.respErr(p, r, syn)
		return
	}
	n := uint32(len(data))
	if w.av.grh {
		n += grhLen
	}
	op := uint8(cqeRespSend)
	if w.opcode == opSendImm {
		op = cqeRespSendIm
	}
	dv.respCQE(p, r, op, n, w.imm, q, w.av.grh, w.solicited(), w.av.sl)
}
