package model

import (
	"bytes"
	"runtime"
	"time"
)

// learnRQ notices receive WQEs posted since the last look.
func (d *Device) learnRQ(q *mqp) bool {
	if q.rqCnt == 0 {
		return false
	}
	cnt := loadBE32(q.db[dbRecRecv:]) & 0xffff
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
		cnt := loadBE32(q.db[dbRecSend:]) & 0xffff
		q.sqPI += (cnt - q.sqPI) & 0xffff
	}
}

func (d *Device) learnSRQ(s *msrq) bool {
	cnt := loadBE32(s.db[dbRecRecv:]) & 0xffff
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
	if cnt := loadBE32(q.db[dbRecSend:]) & 0xffff; cnt != q.sqPI&0xffff {
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
		cnt := loadBE32(q.db[dbRecSend:]) & 0xffff
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
	umr     umr    // a UMR WQE's segments
	xrcSRQN uint32 // an XRC initiator's: the remote SRQ its XRC segment names
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
		ok = w.opcode == opSend || w.opcode == opSendImm || w.opcode == opWrite || w.opcode == opWriteImm || w.opcode == opUMR
	case qptRC:
		switch w.opcode {
		case opSend, opSendImm, opSendInv, opWrite, opWriteImm, opRead, opCS, opFA, opUMR:
		default:
			ok = false
		}
	case qptXRCIni:
		// A UMR (bind, invalidation) is local: rdma-core's mlx5 writes it
		// without the XRC segment (_mlx5_post_send, IBV_QPT_XRC_SEND).
		switch w.opcode {
		case opSend, opSendImm, opSendInv, opWrite, opWriteImm, opRead, opCS, opFA, opUMR:
		default:
			ok = false
		}
	}
	if !ok {
		d.violation("QP %d (type %d): WQE at %d has opcode %#x", q.qpn, q.typ, pos, w.opcode)
		return w, false
	}
	if w.opcode == opUMR {
		if w.umr, ok = decodeUMR(b, size); !ok {
			d.violation("QP %d: UMR WQE at %d of %d bytes is too short for its segments", q.qpn, pos, size)
		}
		return w, ok
	}
	if q.typ == qptXRCIni {
		// struct mlx5_wqe_xrc_seg: the remote SRQ number, 12 reserved bytes.
		if size < 2*wSeg {
			d.violation("QP %d: XRC WQE at %d too short for its XRC segment", q.qpn, pos)
			return w, false
		}
		w.xrcSRQN = be.Uint32(b[off:]) & 0xffffff
		if be.Uint32(b[off:])>>24 != 0 || be.Uint32(b[off+4:]) != 0 || be.Uint64(b[off+8:]) != 0 {
			d.violation("QP %d: XRC segment of the WQE at %d has reserved bits set", q.qpn, pos)
		}
		off += wSeg
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
	// lost: the packet reached no responder QP able to take it (not
	// there, or not in RTR yet): the requester retransmits after its
	// ACK timeout, RetryCnt times, before it reports RETRY_EXC.
	lost bool
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
		if r.lost {
			q.retryTries++
			if q.retryTries <= int(q.retryCnt) {
				q.rnrUntil = time.Now().Add(ackTimeout(q.timeout))
				return did
			}
			r = result{syndrome: synRetryExc}
		}
		q.retryTries = 0
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

// ackTimeout is the local ACK timeout 4.096 µs·2^t, bounded to 100 ms
// (t 0, infinite, included) so that a model's retries end in a test's time.
func ackTimeout(t uint8) time.Duration {
	d := 4096 * time.Nanosecond << min(t, 31)
	if t == 0 || d > 100*time.Millisecond {
		d = 100 * time.Millisecond
	}
	return d
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
	q.rnrTries, q.rnrUntil, q.retryTries = 0, time.Time{}, 0
}
