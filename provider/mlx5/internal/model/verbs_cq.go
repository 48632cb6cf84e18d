package model

import (
	"math/bits"

	"github.com/goverbs/goverbs/abi"
	"golang.org/x/sys/unix"
)

// createCQ is the mlx5 driver's CQ creation: the ring and doorbell record
// are the provider's memory, described by mlx5_ib_create_cq.
func (u *ufile) createCQ(userHandle uint64, cqe uint32, chFD int, din, dout []byte, flags uint64) (*mcq, error) {
	d, ctx := u.d, u.ctx
	var req abi.Mlx5IbCreateCq
	if len(din) < 24 {
		return nil, unix.EINVAL
	}
	copy(abi.Bytes(&req), din)
	if req.CqeSize != 64 && req.CqeSize != 128 || cqe < 1 || cqe > maxCQE || req.CqeCompEn != 0 {
		return nil, unix.EINVAL
	}
	if req.Flags&^(abi.MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX) != 0 || req.BufAddr == 0 || req.DbAddr == 0 || req.DbAddr%8 != 0 {
		return nil, unix.EINVAL
	}
	var p *uarPage
	switch {
	case req.Flags&abi.MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX != 0:
		p = ctx.dynPages[uint32(req.UarPageIndex)]
	case ctx.dyn:
		return nil, unix.EINVAL // dynamic UARs: the CQ must name one
	case len(ctx.staticPages) > 0:
		p = ctx.staticPages[0]
	}
	if p == nil {
		return nil, unix.EINVAL
	}
	var ch *channel
	if chFD >= 0 {
		if ch = d.channels[chFD]; ch == nil {
			return nil, unix.EINVAL
		}
	}
	n := pow2(cqe + 1)
	q := &mcq{ctx: ctx, userHandle: userHandle, ch: ch, cqeSize: int(req.CqeSize), log: uint32(bits.TrailingZeros32(n)), uar: p,
		stamps: flags&abi.IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION != 0}
	pins, v, err := pinRanges([2]uint64{req.BufAddr, uint64(n) * uint64(q.cqeSize)}, [2]uint64{req.DbAddr, 8})
	if err != nil {
		return nil, err
	}
	q.pins, q.buf, q.db = pins, v[0], v[1]
	for i := 0; i < int(n); i++ {
		if q.buf[i*q.cqeSize+q.cqeSize-cqe64+cOpOwn]>>4 != cqeInvalid {
			d.violation("CQ created with CQE %d not marked INVALID (op_own %#x)", i, q.buf[i*q.cqeSize+q.cqeSize-cqe64+cOpOwn])
			break
		}
	}
	q.lastArm = loadBE32(q.db[dbRecArm:])
	q.cqn = d.nextCQN
	d.nextCQN++
	q.handle = ctx.add(q)
	d.cqs[q.cqn] = q
	if len(dout) >= 4 {
		clear(dout)
		ne.PutUint32(dout, q.cqn)
	}
	return q, nil
}

func (u *ufile) cmdCreateCQ(in, out, din, dout []byte) error {
	var req abi.IbUverbsCreateCq
	copy(abi.Bytes(&req), in)
	q, err := u.createCQ(req.UserHandle, req.Cqe, int(req.CompChannel), din, dout, 0)
	if err != nil {
		return err
	}
	r := abi.IbUverbsCreateCqResp{CqHandle: q.handle, Cqe: 1<<q.log - 1}
	copy(out, abi.Bytes(&r))
	return nil
}

func (u *ufile) cmdExCreateCQ(in, out, din, dout []byte) error {
	var req abi.IbUverbsExCreateCq
	copy(abi.Bytes(&req), in)
	if req.CompMask != 0 || req.Flags&^cqCreateFlags != 0 {
		return unix.EOPNOTSUPP
	}
	q, err := u.createCQ(req.UserHandle, req.Cqe, int(req.CompChannel), din, dout, uint64(req.Flags))
	if err != nil {
		return err
	}
	r := abi.IbUverbsExCreateCqResp{Base: abi.IbUverbsCreateCqResp{CqHandle: q.handle, Cqe: 1<<q.log - 1}}
	r.ResponseLength = uint32(min(len(out), size[abi.IbUverbsExCreateCqResp]()))
	copy(out, abi.Bytes(&r))
	return nil
}

// cmdResizeCQ is the mlx5 driver's resize: the provider's new ring is in
// mlx5_ib_resize_cq. The device writes a RESIZE CQE into the old ring at
// the producer index and goes on in the new ring after it.
func (u *ufile) cmdResizeCQ(in, out, din, dout []byte) error {
	d := u.d
	var req abi.IbUverbsResizeCq
	copy(abi.Bytes(&req), in)
	q, ok := u.ctx.objs[req.CqHandle].(*mcq)
	if !ok || req.Cqe < 1 || req.Cqe > maxCQE || len(din) < size[abi.Mlx5IbResizeCq]() {
		return unix.EINVAL
	}
	var dr abi.Mlx5IbResizeCq
	copy(abi.Bytes(&dr), din)
	n := pow2(req.Cqe + 1)
	r := abi.IbUverbsResizeCqResp{Cqe: n - 1}
	if n == 1<<q.log {
		copy(out, abi.Bytes(&r))
		return nil
	}
	if dr.CqeSize != 64 && dr.CqeSize != 128 || dr.BufAddr == 0 {
		return unix.EINVAL
	}
	ci := loadBE32(q.db[dbRecSetCI:]) & 0xffffff
	if pending := (q.pi - ci) & 0xffffff; pending >= n || pending >= 1<<q.log {
		return unix.EINVAL // the CQEs waiting would not fit, or no room for the RESIZE CQE
	}
	var e [cqe64]byte
	e[cOpOwn] = cqeResize << 4
	armed := q.armed
	q.armed = false // the RESIZE CQE raises no event
	d.writeCQE(q, &e)
	q.armed = armed
	q.cqeSize = int(dr.CqeSize)
	q.log = uint32(bits.TrailingZeros32(n))
	pins, v, err := pinRanges([2]uint64{dr.BufAddr, uint64(n) * uint64(dr.CqeSize)})
	if err != nil {
		return err
	}
	q.pins = append(q.pins, pins...)
	q.buf = v[0]
	for i := 0; i < int(n); i++ {
		if q.buf[i*q.cqeSize+q.cqeSize-cqe64+cOpOwn]>>4 != cqeInvalid {
			d.violation("CQ %d resized to a ring whose CQE %d is not marked INVALID", q.cqn, i)
			break
		}
	}
	copy(out, abi.Bytes(&r))
	return nil
}

func (u *ufile) destroyCQ(h uint32, r *abi.IbUverbsDestroyCqResp) error {
	q, ok := u.ctx.objs[h].(*mcq)
	if !ok {
		return unix.EINVAL
	}
	if q.users > 0 {
		return unix.EBUSY
	}
	// An arm doorbell written before the destroy reached the device
	// first: take it now, as hardware would have, not as a doorbell for
	// a CQ that no longer exists.
	if q.uar != nil {
		u.d.serviceArmRegister(q.uar)
	}
	delete(u.ctx.objs, h)
	delete(u.d.cqs, q.cqn)
	q.pins.release()
	r.CompEventsReported = q.events
	return nil
}

func (u *ufile) cmdDestroyCQ(in, out, din, dout []byte) error {
	var req abi.IbUverbsDestroyCq
	copy(abi.Bytes(&req), in)
	var r abi.IbUverbsDestroyCqResp
	if err := u.destroyCQ(req.CqHandle, &r); err != nil {
		return err
	}
	copy(out, abi.Bytes(&r))
	return nil
}

// The CQ moderation limits mlx5_ib reports and checks (MLX5_MAX_CQ_COUNT,
// MLX5_MAX_CQ_PERIOD).
const (
	maxCQCount  = 1<<16 - 1
	maxCQPeriod = 1<<12 - 1
)

// cmdExModifyCQ is ib_uverbs_ex_modify_cq then mlx5_ib_modify_cq: the
// core refuses a zero attr_mask or reserved bits (EINVAL) and attributes
// beyond IB_CQ_MODERATE (EOPNOTSUPP); mlx5 a period over its limit.
func (u *ufile) cmdExModifyCQ(in, out, din, dout []byte) error {
	var req abi.IbUverbsExModifyCq
	copy(abi.Bytes(&req), in)
	switch {
	case req.AttrMask == 0 || req.Reserved != 0:
		return unix.EINVAL
	case req.AttrMask > 1:
		return unix.EOPNOTSUPP
	}
	q, ok := u.ctx.objs[req.CqHandle].(*mcq)
	if !ok || req.Attr.CqPeriod > maxCQPeriod {
		return unix.EINVAL
	}
	q.modCount, q.modPeriod = req.Attr.CqCount, req.Attr.CqPeriod
	return nil
}

// CQModeration returns the event moderation MODIFY_CQ set on the CQ
// numbered cqn (count, period), and whether the CQ exists.
func (d *Device) CQModeration(cqn uint32) (count, period uint16, ok bool) {
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	q := d.cqs[cqn]
	if q == nil {
		return 0, 0, false
	}
	return q.modCount, q.modPeriod, true
}

// CQNs lists the numbers of the device's CQs.
func (d *Device) CQNs() []uint32 {
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	var ns []uint32
	for n := range d.cqs {
		ns = append(ns, n)
	}
	return ns
}

// CQConsumerIndex returns the consumer index the provider last wrote to the
// doorbell record of the CQ numbered cqn (its set_ci word, 24 bits), and
// whether the CQ exists.
func (d *Device) CQConsumerIndex(cqn uint32) (uint32, bool) {
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	q := d.cqs[cqn]
	if q == nil {
		return 0, false
	}
	return loadBE32(q.db[dbRecSetCI:]) & 0xffffff, true
}
