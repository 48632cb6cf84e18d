package uverbs

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// CQOptions are a CQ's optional settings.
type CQOptions struct {
	// Channel receives the CQ's completion events (nil: no events).
	Channel *CompChannel
	// Vector is the completion vector (0 … NumCompVectors-1).
	Vector int
	// Timestamps makes the device stamp each completion with its
	// free-running clock (ibv_create_cq_ex with
	// IBV_WC_EX_WITH_COMPLETION_TIMESTAMP), read with CQPoll.Timestamp.
	// A device whose DeviceAttr.CompletionTimestampMask is 0 (rxe, siw)
	// has no such clock: CreateCQ then fails with ErrNotSupported.
	Timestamps bool
	// WaitSpin caps how long Wait polls the empty CQ before it arms the
	// CQ and parks (see Wait): 0 is DefaultWaitSpin (or the duration in
	// the environment variable WaitSpinEnv names), a negative value turns
	// the spinning off (Wait then always arms and parks).
	WaitSpin time.Duration
	// WaitSpinMax, above WaitSpin, lets the cap follow the waits: a wait
	// that parked and ended within WaitSpinMax raises the cap to 1.5
	// times its length (at most WaitSpinMax), shorter waits lower it
	// slowly towards WaitSpin, and waits longer than WaitSpinMax park as
	// they do without growth. For streams whose waits are longer than
	// WaitSpin but short (rsocket's large messages under emulation). 0:
	// the duration in the environment variable WaitSpinMaxEnv names, if
	// set; otherwise, or not above WaitSpin: the cap stays WaitSpin.
	WaitSpinMax time.Duration
	// SingleThreaded promises that the program orders every call on the
	// CQ (Poll, CQPoll passes, Wait, ReqNotify, Resize, Close), and Modify
	// and Close of the QPs that complete to it, as one goroutine's calls
	// would be ordered: one goroutine makes them, or hands the CQ on
	// through a channel or lock of its own. Posts on a QP without
	// QPInit.SingleThreaded may still come from any goroutine. Close then
	// wakes no Wait in another goroutine (there is none). A provider may
	// then poll without a lock: mlx5's Poll makes no locked instruction
	// (rdma-core's IBV_CREATE_CQ_ATTR_SINGLE_THREADED), nor do rxe's and
	// siw's on amd64 (they skip the exchange that lets Close and Resize
	// run beside a Poll). A QP created with QPInit.SingleThreaded
	// needs such CQs. Completion events still arrive from any goroutine.
	SingleThreaded bool
}

// CQ is a completion queue. Poll is the provider's fast path: no syscall,
// no allocation. One goroutine polls a CQ at a time (Poll and Wait both
// poll).
//
// ReqNotify, Resize and the getters are safe for concurrent use. Close
// waits for the slow verbs in flight, destroys the CQ and wakes every
// goroutine parked in its Wait, which returns an error for which
// errors.Is(err, ErrClosed) holds; so does every verb after Close or after
// the Context closed (Poll too), and the CQ's handle never reaches the
// kernel again. Close is idempotent.
type CQ struct {
	ctx     *Context
	prov    provider.CQ
	handle  uint32
	cqe     atomic.Int64 // as the kernel sized it; Resize changes it
	resize  sync.Mutex   // one Resize at a time
	tag     uint64       // user_handle: the key events carry
	channel *CompChannel
	single  bool // CQOptions.SingleThreaded

	wake    chan struct{} // capacity 1: a completion event arrived for Wait
	queued  bool          // in channel.ready (guarded by channel.mu)
	waiters atomic.Int32  // goroutines in Wait: events go to them, not to CompChannel.Wait
	armed   atomic.Bool   // armed and no event seen since (Wait's state)
	events  atomic.Uint32 // completion events consumed
	spinner waitSpin      // Wait's adaptive spin (the one polling goroutine's)
	lifetime

	stamps provider.TimestampPoller // non-nil: created with CQOptions.Timestamps
	passer provider.PassPoller      // non-nil: the provider tells the device its consumer index once per CQPoll pass
	pass   CQPoll                   // StartPoll's cursor (one poller at a time)
}

// errPollClosed is Poll's error on a closed CQ (preallocated: the fast
// path allocates nothing).
var errPollClosed error = &OpError{Verb: "PollCQ", Err: ErrClosed}

// CreateCQ creates a completion queue for at least cqe completions (the
// ioctl CQ_CREATE method, or the CREATE_CQ write command: one syscall).
func (c *Context) CreateCQ(cqe int, o CQOptions) (_ *CQ, err error) {
	if sp := c.begin("CreateCQ"); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	dev := c.dev.Name
	if cqe <= 0 {
		return nil, argError("CreateCQ", dev, "cqe %d", cqe)
	}
	if o.Vector < 0 || (c.numCompVectors > 0 && o.Vector >= c.numCompVectors) {
		return nil, argError("CreateCQ", dev, "completion vector %d of %d", o.Vector, c.numCompVectors)
	}
	if o.Channel != nil {
		if o.Channel.ctx != c {
			return nil, argError("CreateCQ", dev, "the completion channel belongs to another context")
		}
		// The channel stays open while its descriptor is in the command.
		if err := o.Channel.use("CreateCQ", dev); err != nil {
			return nil, &OpError{Verb: "CreateCQ", Device: dev, Err: fmt.Errorf("the completion channel: %w", ErrClosed)}
		}
		defer o.Channel.done()
	}
	return c.createCQ(cqe, o)
}

// createCQ is CreateCQ once its arguments are checked. (Split from it so
// that each keeps few enough defers and returns for the compiler to
// open-code the defers: together they went through the runtime's defer
// records, ~440 instructions a create.)
func (c *Context) createCQ(cqe int, o CQOptions) (_ *CQ, err error) {
	dev := c.dev.Name
	var flags uint32
	if o.Timestamps {
		if err := c.timestampsSupported("CreateCQ"); err != nil && !c.skipCapChecks {
			return nil, err
		}
		flags |= abi.IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION
	}
	setup, err := c.prov.CreateCQ(provider.CQAttr{CQE: cqe, Timestamps: o.Timestamps, SingleThreaded: o.SingleThreaded})
	if err != nil {
		return nil, opError("CreateCQ", dev, abi.TransportNone, err)
	}
	tag := c.cqs.reserve()
	defer c.cqs.abandon(tag, &err) // a failed create frees the slot
	in, out := setup.Udata()
	channel := -1
	if o.Channel != nil {
		channel = o.Channel.fd
	}
	handle, got, err := c.createCQCommand(cqCommand{cqe: uint32(cqe), vector: uint32(o.Vector), channel: channel, flags: flags, tag: tag}, in, out)
	if err != nil {
		setup.Abort()
		return nil, err
	}
	cq := &CQ{ctx: c, handle: handle, tag: tag, channel: o.Channel, single: o.SingleThreaded, wake: make(chan struct{}, 1), spinner: newWaitSpin(o.WaitSpin, o.WaitSpinMax)}
	cq.cqe.Store(int64(got))
	prov, err := setup.Complete(provider.CQCreated{Handle: handle, CQE: got})
	if err != nil {
		cq.destroyKernel()
		return nil, opError("CreateCQ", dev, abi.TransportNone, err)
	}
	cq.prov = prov
	if o.Timestamps {
		tp, ok := prov.(provider.TimestampPoller)
		if !ok {
			cq.destroyKernel()
			prov.Close()
			return nil, opError("CreateCQ", dev, abi.TransportNone,
				fmt.Errorf("%w: the %s provider reads no completion timestamps", ErrNotSupported, c.dev.Driver))
		}
		cq.stamps = tp
	}
	cq.passer, _ = prov.(provider.PassPoller)
	c.cqs.set(tag, cq)
	return cq, nil
}

// cqCommand is what CQ_CREATE carries besides the driver's data.
type cqCommand struct {
	cqe, vector uint32
	channel     int // a completion channel's descriptor, or -1
	flags       uint32
	tag         uint64 // the user handle
}

// createCQCommand sends CQ_CREATE and returns the new CQ's handle and
// size: by the flat path where it can (abi.File.FlatMethod: the wire on
// the stack, ~1,500 instructions of the builder's bookkeeping fewer under
// emulation), else by the builder (createCQBuilt).
func (c *Context) createCQCommand(a cqCommand, in, out []byte) (handle, got uint32, err error) {
	inline := [6]abi.FlatAttr{
		{ID: abi.UVERBS_ATTR_CREATE_CQ_HANDLE}, // UVERBS_ACCESS_NEW: the kernel writes the handle here
		{ID: abi.UVERBS_ATTR_CREATE_CQ_CQE, Len: 4, Data: uint64(a.cqe)},
		{ID: abi.UVERBS_ATTR_CREATE_CQ_USER_HANDLE, Len: 8, Data: a.tag},
		{ID: abi.UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, Len: 4, Data: uint64(a.vector)},
	}
	ni := 4
	if a.channel >= 0 {
		inline[ni] = abi.FlatAttr{ID: abi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, Data: uint64(uint32(int32(a.channel)))}
		ni++
	}
	if a.flags != 0 {
		inline[ni] = abi.FlatAttr{ID: abi.UVERBS_ATTR_CREATE_CQ_FLAGS, Len: 4, Data: uint64(a.flags)}
		ni++
	}
	var respCQE [4]byte
	bufs := [3]abi.FlatBuf{{ID: abi.UVERBS_ATTR_CREATE_CQ_RESP_CQE, Out: true, B: respCQE[:]}}
	nb := abi.FlatUHW(bufs[:], 1, in, out)
	done, valid, err := c.flatMethod("CreateCQ", abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_CREATE, c.cpuOnly, inline[:ni], bufs[:nb])
	if !done {
		return c.createCQBuilt(a, in, out)
	}
	if err != nil {
		return 0, 0, err
	}
	if valid&1 != 0 {
		got = ne.Uint32(respCQE[:])
	}
	return uint32(inline[0].Data), got, nil
}

// createCQBuilt is createCQCommand by the builder, with CREATE_CQ (or
// its extended form, for flags) by write where the kernel has no method.
func (c *Context) createCQBuilt(a cqCommand, in, out []byte) (handle, got uint32, err error) {
	b := abi.NewIoctl(abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_CREATE)
	defer b.Release()
	if c.cpuOnly {
		b.Quick()
	}
	h := b.NewObject(abi.UVERBS_ATTR_CREATE_CQ_HANDLE)
	b.Uint32In(abi.UVERBS_ATTR_CREATE_CQ_CQE, a.cqe)
	b.Uint64In(abi.UVERBS_ATTR_CREATE_CQ_USER_HANDLE, a.tag)
	if a.channel >= 0 {
		b.FD(abi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, a.channel)
	}
	b.Uint32In(abi.UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, a.vector)
	if a.flags != 0 {
		b.Uint32In(abi.UVERBS_ATTR_CREATE_CQ_FLAGS, a.flags)
	}
	respCQE := b.PtrOutLen(abi.UVERBS_ATTR_CREATE_CQ_RESP_CQE, 4)
	b.UHW(in, out)
	tr, err := c.ioctl("CreateCQ", b, func() error {
		if a.flags != 0 {
			// Flags need the extended command (ib_uverbs_ex_create_cq).
			req := abi.IbUverbsExCreateCq{UserHandle: a.tag, Cqe: a.cqe, CompVector: a.vector,
				CompChannel: int32(a.channel), Flags: a.flags}
			var resp abi.IbUverbsExCreateCqResp
			cmd := abi.Command{Num: abi.IB_USER_VERBS_EX_CMD_CREATE_CQ | abi.IB_USER_VERBS_CMD_FLAG_EXTENDED,
				In: abi.Bytes(&req), Out: abi.Bytes(&resp), DriverIn: in, DriverOut: out}
			if err := c.fallback("CreateCQ", &cmd); err != nil {
				return err
			}
			handle, got = resp.Base.CqHandle, resp.Base.Cqe
			return nil
		}
		req := abi.IbUverbsCreateCq{UserHandle: a.tag, Cqe: a.cqe, CompVector: a.vector, CompChannel: int32(a.channel)}
		var resp abi.IbUverbsCreateCqResp
		cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_CREATE_CQ, In: abi.Bytes(&req), Out: abi.Bytes(&resp), DriverIn: in, DriverOut: out}
		if err := c.fallback("CreateCQ", &cmd); err != nil {
			return err
		}
		handle, got = resp.CqHandle, resp.Cqe
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	if tr == abi.TransportIoctl {
		handle = uint32(b.Result(h))
		if v := b.Output(respCQE); len(v) == 4 {
			got = ne.Uint32(v)
		}
	}
	return handle, got, nil
}

// timestampsSupported is the capability check of a CQ with timestamps:
// the device must report a completion timestamp mask (QUERY_DEVICE_EX).
func (c *Context) timestampsSupported(verb string) error {
	a, err := c.capabilities()
	if err != nil {
		return err
	}
	if a.CompletionTimestampMask == 0 {
		return opError(verb, c.dev.Name, abi.TransportNone,
			fmt.Errorf("%w: the device has no completion timestamp clock (completion_timestamp_mask 0)", ErrNotSupported))
	}
	return nil
}

// Timestamps reports whether the CQ was created with CQOptions.Timestamps.
func (cq *CQ) Timestamps() bool { return cq.stamps != nil }

// Handle is the kernel's handle for the CQ.
func (cq *CQ) Handle() uint32 { return cq.handle }

// CQE is the number of completions the CQ holds, as the kernel sized it.
func (cq *CQ) CQE() int { return int(cq.cqe.Load()) }

// Channel is the completion channel the CQ reports events to, or nil.
func (cq *CQ) Channel() *CompChannel { return cq.channel }

// Poll fills wc with up to len(wc) completions and returns how many. It
// makes no syscall and allocates nothing; wc is not kept after the call,
// so an array on the caller's stack (var wc [16]WorkCompletion;
// cq.Poll(wc[:])) stays there.
func (cq *CQ) Poll(wc []WorkCompletion) (int, error) {
	w := wcNoEscape(wc) // the caller's array may stay on its stack
	if cq.ctx.rec.Load() != nil || cq.gone.Load() {
		return cq.pollSlow(w)
	}
	return cq.prov.Poll(w)
}

// pollSlow is Poll with a recorder or a closed CQ.
func (cq *CQ) pollSlow(wc []WorkCompletion) (int, error) {
	if cq.gone.Load() {
		return 0, errPollClosed
	}
	sp := cq.ctx.begin("PollCQ")
	n, err := cq.prov.Poll(wc)
	sp.end(err)
	return n, err
}

// ReqNotify arms the CQ: the next completion (the next solicited one, if
// solicitedOnly) produces one event on its channel. Poll again after
// arming: a completion that arrived before it produces no event.
func (cq *CQ) ReqNotify(solicitedOnly bool) (err error) {
	if sp := cq.ctx.begin("ReqNotifyCQ"); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	if err := cq.use("ReqNotifyCQ", cq.ctx.dev.Name); err != nil {
		return err
	}
	defer cq.done()
	if err := cq.prov.Arm(solicitedOnly); err != nil {
		return opError("ReqNotifyCQ", cq.ctx.dev.Name, abi.TransportNone, err)
	}
	return nil
}

// Wait returns the next completions, waiting for one when the CQ is empty.
// It polls; if nothing is there it spins, polling the CQ for a while (no
// syscall, no event); if still nothing is there it arms the CQ, polls
// again (a completion may have slipped in before the arm), and only then
// parks on the channel until an event comes or ctx is done. No completion
// is ever missed, and a waiting goroutine holds no OS thread. The CQ needs
// a channel. A parked Wait that finds the channel unread reads it itself
// (see CompChannel), so a lone waiter's event costs one wake-up by the
// runtime poller and no hand-off between goroutines.
//
// The spin lasts at most a cap, CQOptions.WaitSpin (DefaultWaitSpin, 1 ms),
// counted in polls (the cost of a poll is timed now and then; time the spin
// gives to other tasks does not count); once 16 waits in a row outlast it,
// Wait parks at once and spins (for 4 times the cap) on one wait in 8 only,
// until a spin finds a completion again. With CQOptions.WaitSpinMax above
// WaitSpin the cap follows the waits, between the two: a wait that parked
// and ended within WaitSpinMax (timed by two clock reads, on parked waits
// only) raises it, so the next such wait is spun through. A completion
// found while spinning costs no scheduler hand-off and no syscall but one
// raw sched_yield per 512 polls (two clock reads around it), made so that a
// kernel thread the spin waits for (rxe's sends on Linux 6.12 and 7.x) gets
// the spinning CPU; while its yields find such work, the spin yields once
// per 64 polls. A parked wait costs the arm, the channel's read and a
// wake-up by the runtime poller. The price is CPU: the goroutine keeps its
// OS thread busy while it spins (at most the cap per Wait, four times that
// on a probe: WaitSpin, or up to WaitSpinMax with growth). ctx is looked at
// while spinning, a Close of the CQ or the Context is seen at the next
// poll, a Close of the channel or the device's removal when the spin ends.
// CQOptions.WaitSpin < 0 turns spinning off.
//
// While a goroutine is in Wait, the CQ's completion events are its own:
// CompChannel.Wait does not return the CQ for them, and an event already
// queued for CompChannel.Wait is taken over by Wait. Close of the CQ, of
// its channel or of the Context wakes Wait, which then returns an error
// for which errors.Is(err, ErrClosed) holds. If the device is removed
// (its device node deleted, or Context.DeviceRemoved called: rdmacm does on
// DEVICE_REMOVAL), Wait returns the completions still there, then an error
// wrapping ENODEV. These are all that wake it: a completion event, ctx,
// Close, the channel's reader failing, the device's removal.
func (cq *CQ) Wait(ctx context.Context, wc []WorkCompletion) (int, error) {
	ch := cq.channel
	if ch == nil {
		return 0, argError("CQ.Wait", cq.ctx.dev.Name, "the CQ has no completion channel")
	}
	cq.waiters.Add(1)
	var holding, woken bool // the reader's token; a wake-up from ch.free
	defer func() {
		cq.waiters.Add(-1)
		if holding || woken {
			ch.leave(holding, false)
		}
	}()
	if ch.unqueue(cq) {
		cq.armed.Store(false) // the queued event is ours: the CQ is disarmed
	}
	if err := cq.waitClosed(); err != nil {
		return 0, err
	}
	if n, err := cq.Poll(wc); n > 0 || err != nil {
		return n, err
	}
	n, ended, polls, err := cq.spin(ctx, wc)
	s := &cq.spinner
	if ended {
		if n > 0 {
			s.observe(s.spent(polls + 1))
		}
		return n, err
	}
	s.parked()
	if !s.grows() {
		return cq.park(ctx, wc, &holding, &woken)
	}
	start := abi.Nanotime()
	n, err = cq.park(ctx, wc, &holding, &woken)
	if n > 0 {
		s.observe(s.spent(polls) + abi.Nanotime() - start)
	}
	return n, err
}

// park is Wait once its spin found nothing: arm, poll, and park until an
// event, ctx or a close. holding and woken are Wait's (its deferred leave
// reads them).
func (cq *CQ) park(ctx context.Context, wc []WorkCompletion, holding, woken *bool) (int, error) {
	ch := cq.channel
	for {
		if err := cq.waitClosed(); err != nil {
			return 0, err
		}
		n, err := cq.Poll(wc)
		if n > 0 || err != nil {
			return n, err
		}
		if !cq.armed.Load() {
			if err := cq.ReqNotify(false); err != nil {
				if err = cq.ctx.lostOr("CQ.Wait", err); cq.ctx.lost.Load() {
					// What completed before the loss comes first.
					if n, perr := cq.Poll(wc); n > 0 || perr != nil {
						return n, perr
					}
				}
				return 0, err
			}
			cq.armed.Store(true)
			continue
		}
		select {
		case <-cq.wake:
			cq.armed.Store(false)
			continue
		default:
		}
		if !*holding && ch.acquire() {
			*holding = true
		}
		if *holding {
			// This goroutine reads the channel: its own event wakes it
			// with no hand-off.
			if err := ch.readFor(ctx, "CQ.Wait"); err != nil {
				if cq.ctx.lost.Load() {
					if n, err := cq.Poll(wc); n > 0 || err != nil {
						return n, err
					}
				}
				if e := cq.waitClosed(); e != nil {
					return 0, e
				}
				return 0, err
			}
			continue
		}
		select {
		case <-cq.wake:
			cq.armed.Store(false)
		case <-ch.free:
			*woken = true // the reader left: take its place
		case <-cq.closed():
		case <-ch.closed():
		case <-ch.stopped:
			if err := cq.waitClosed(); err != nil {
				return 0, err
			}
			return 0, ch.stopError("CQ.Wait")
		case <-cq.ctx.dead:
		case <-cq.ctx.lostCh:
			if n, err := cq.Poll(wc); n > 0 || err != nil {
				return n, err
			}
			return 0, cq.ctx.lostError("CQ.Wait")
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// waitClosed is Wait's error when the CQ, its channel or its context is
// closed.
func (cq *CQ) waitClosed() error {
	var what string
	switch {
	case cq.isClosed():
		return &OpError{Verb: "CQ.Wait", Device: cq.ctx.dev.Name, Err: ErrClosed}
	case cq.ctx.closed.Load():
		what = "the context"
	case cq.channel.isClosed():
		what = "the completion channel"
	default:
		return nil
	}
	return &OpError{Verb: "CQ.Wait", Device: cq.ctx.dev.Name, Err: fmt.Errorf("%s: %w", what, ErrClosed)}
}

// Events is the number of completion events consumed for this CQ.
func (cq *CQ) Events() uint32 { return cq.events.Load() }

// Resize changes the CQ to hold at least cqe completions (RESIZE_CQ: one
// syscall). Providers that cannot resize return ErrNotSupported.
func (cq *CQ) Resize(cqe int) (err error) {
	if sp := cq.ctx.begin("ResizeCQ"); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	dev := cq.ctx.dev.Name
	if cqe <= 0 {
		return argError("ResizeCQ", dev, "cqe %d", cqe)
	}
	if err := cq.use("ResizeCQ", dev); err != nil {
		return err
	}
	defer cq.done()
	cq.resize.Lock()
	defer cq.resize.Unlock()
	setup, err := cq.prov.Resize(cqe)
	if err != nil {
		return opError("ResizeCQ", dev, abi.TransportNone, err)
	}
	in, out := setup.Udata()
	req := abi.IbUverbsResizeCq{CqHandle: cq.handle, Cqe: uint32(cqe)}
	var resp abi.IbUverbsResizeCqResp
	cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_RESIZE_CQ, In: abi.Bytes(&req), Out: abi.Bytes(&resp), DriverIn: in, DriverOut: out}
	if err := cq.ctx.invoke("ResizeCQ", &cmd); err != nil {
		setup.Abort()
		return err
	}
	if _, err := setup.Complete(resp.Cqe); err != nil {
		return opError("ResizeCQ", dev, abi.TransportNone, err)
	}
	cq.cqe.Store(int64(resp.Cqe))
	return nil
}

func (cq *CQ) destroyKernel() error {
	req := abi.IbUverbsDestroyCq{CqHandle: cq.handle}
	var resp abi.IbUverbsDestroyCqResp
	return cq.ctx.destroyObject("DestroyCQ", abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_DESTROY, cq.handle,
		abi.UVERBS_ATTR_DESTROY_CQ_RESP, abi.Bytes(&resp),
		&abi.Command{Num: abi.IB_USER_VERBS_CMD_DESTROY_CQ, In: abi.Bytes(&req), Out: abi.Bytes(&resp), Quick: cq.ctx.cpuOnly})
}

// Close destroys the CQ (EBUSY while a QP uses it) and releases its
// memory. Idempotent.
func (cq *CQ) Close() error {
	// The span starts inside close: a Close after success is a no-op, not a call.
	err := cq.close(func() (err error) {
		if sp := cq.ctx.begin("DestroyCQ"); sp.rec != nil {
			defer func() { sp.end(err) }()
		}
		if err := cq.destroyKernel(); err != nil {
			return err
		}
		cq.forget()
		return cq.prov.Close()
	})
	if err == nil && cq.channel != nil && cq.waiters.Load() > 0 {
		cq.channel.kick() // a CQ.Wait may be the channel's reader
	}
	return err
}

// forget removes the destroyed CQ from the context's event table and from
// its channel's queue, so that no event or CompChannel.Wait names it again.
func (cq *CQ) forget() {
	cq.ctx.cqs.remove(cq.tag)
	if cq.channel != nil {
		cq.channel.unqueue(cq)
	}
}

// releaseProvider destroys the kernel object and frees the provider's
// memory when the context closes with the object still open. A failed
// destroy is not fatal: closing the file destroys the object.
func (cq *CQ) releaseProvider() error {
	return cq.close(func() error {
		cq.destroyKernel()
		cq.forget()
		return cq.prov.Close()
	})
}
