package model

import (
	"runtime"
	"time"

	"github.com/goverbs/goverbs/abi"
)

// Async event types (enum ib_event_type).
const (
	evCQErr           = 0
	evQPReqErr        = 2
	evQPAccessErr     = 3
	evDeviceFatal     = 8
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
	if d.runPrefetches() {
		busy = true
	}
	return busy
}

// ---- CQ arming ----

// serviceArmRegister notices a new value in a UAR's CQ arm register:
// (arm word)<<32 | cqn, big-endian.
func (d *Device) serviceArmRegister(p *uarPage) bool {
	v := loadBE64(p.reg(uarCQArm))
	if v == p.lastArm {
		return false
	}
	p.lastArm = v
	c := d.cqs[uint32(v)]
	if c == nil || c.uar != p {
		d.violation("CQ arm doorbell for CQ %d, which is not armed through this UAR", uint32(v))
		return true
	}
	// The device takes the arm word from the UAR write; it never compares
	// it with the doorbell record, which the next ReqNotify may already
	// have rewritten (its record store lands before its UAR store, and the
	// model may read between the two).
	w := uint32(v >> 32)
	c.lastArm = w
	d.stats.Arms++
	d.arm(c, w)
	return true
}

// serviceArmRecord notices a new arm word in a CQ's doorbell record and
// waits for the UAR write that must follow it. A later ReqNotify may
// rewrite both before the model looks again: then the newer word, in the
// record and on the UAR, is the one the device takes (it saw both writes;
// the first asked for nothing the second does not).
func (d *Device) serviceArmRecord(c *mcq) bool {
	w := loadBE32(c.db[dbRecArm:])
	if w == c.lastArm {
		return false
	}
	deadline := time.Now().Add(d.o.DoorbellWait)
	for {
		if v := loadBE64(c.uar.reg(uarCQArm)); v == uint64(w)<<32|uint64(c.cqn) {
			break
		}
		if now := loadBE32(c.db[dbRecArm:]); now != w {
			w = now // superseded: wait for the newer word's UAR write
			deadline = time.Now().Add(d.o.DoorbellWait)
			continue
		}
		if time.Now().After(deadline) {
			c.lastArm = w
			d.stats.MissedArms++
			d.violation("CQ %d: arm word %#x in the doorbell record without the UAR write (the UAR holds %#x)",
				c.cqn, w, loadBE64(c.uar.reg(uarCQArm)))
			return true
		}
		runtime.Gosched()
	}
	c.uar.lastArm = uint64(w)<<32 | uint64(c.cqn)
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

// cqCreateFlags are the CREATE_CQ flags the model accepts: completion
// timestamps (mlx5_ib_create_cq also takes IGNORE_OVERRUN, which the model
// does not model: it refuses it).
const cqCreateFlags = abi.IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION

// clockKHz is the model's device_frequency_khz: 1 GHz, a tick a nanosecond.
const clockKHz = 1000000

// clockEpoch is when the model's free-running clock read 0.
var clockEpoch = time.Now()

// clockTicks reads the free-running clock that stamps CQEs (63 bits).
func clockTicks() uint64 {
	return uint64(time.Since(clockEpoch).Nanoseconds()) * clockKHz / 1000000 & (1<<63 - 1)
}

// writeCQE writes e (a 64-byte CQE without its owner bit) at the CQ's
// producer index, owner bit last, then raises an event if the CQ is armed
// for it.
func (d *Device) writeCQE(c *mcq, e *[cqe64]byte) {
	n := uint32(1) << c.log
	ci := loadBE32(c.db[dbRecSetCI:]) & 0xffffff
	if (c.pi-ci)&0xffffff >= n {
		if !c.overflow {
			d.violation("CQ %d overrun: %d CQEs unconsumed in a CQ of %d", c.cqn, (c.pi-ci)&0xffffff, n)
			d.asyncEvent(c.ctx, c.userHandle, evCQErr)
		}
		c.overflow = true
		return
	}
	e[cOpOwn] = e[cOpOwn]&^1 | byte(c.pi>>c.log)&1
	if c.stamps {
		be.PutUint64(e[cTimestamp:], clockTicks())
	}
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
