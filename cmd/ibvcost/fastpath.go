package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// The fast path runs on two RC QPs of one device connected to each other
// (loopback, addressed through a GRH on RoCE), each with its own send CQ and
// receive CQ and a registered 128 KiB buffer. A sends, B receives and is the
// RDMA target.
const (
	fastBuf   = 128 << 10
	window    = 32  // msg_rate: outstanding WRITEs
	signalGap = 8   // msg_rate: every 8th WRITE is signaled
	chunk     = 256 // msg_rate: messages per sample
	batchRecv = 32  // post_recv: receives per sample
	batchPoll = 100 // poll_cq_empty: polls per sample
	batchHit  = 16  // poll_cq: completions per sample
	waitLimit = 30 * time.Second
)

// end is one QP of the pair.
type end struct {
	qp       *uverbs.QP
	scq, rcq *uverbs.CQ
	buf      *mmap.Region
	mr       *uverbs.MR
}

func (e *end) addr(off int) uint64 { return uint64(e.buf.Addr()) + uint64(off) }

func (e *end) sge(off int, n int64) uverbs.SGE {
	return uverbs.SGE{Addr: e.addr(off), Length: uint32(n), LKey: e.mr.LKey()}
}

func (e *end) close() {
	if e.qp != nil {
		e.qp.Close()
	}
	for _, cq := range []*uverbs.CQ{e.scq, e.rcq} {
		if cq != nil {
			cq.Close()
		}
	}
	if e.mr != nil {
		e.mr.Close()
	}
	if e.buf != nil {
		e.buf.Close()
	}
}

// fast is the connected pair.
type fast struct {
	w    *workload
	a, b *end
	wc   []uverbs.WorkCompletion
}

func (w *workload) newEnd() (*end, error) {
	e := &end{}
	var err error
	if e.scq, err = w.ctx.CreateCQ(cqEntries, uverbs.CQOptions{}); err != nil {
		return e, err
	}
	if e.rcq, err = w.ctx.CreateCQ(cqEntries, uverbs.CQOptions{}); err != nil {
		return e, err
	}
	if e.qp, err = w.pd.CreateQP(w.qpInit(e.scq, e.rcq)); err != nil {
		return e, err
	}
	if e.buf, err = mmap.Anonymous(fastBuf); err != nil {
		return e, err
	}
	e.mr, err = w.pd.RegMR(e.buf.Bytes(), mrAccess)
	return e, err
}

// connect takes e's QP to RTS, aimed at remote.
func (w *workload) connect(e *end, remote uint32) error {
	return e.qp.Connect(w.endpoint(e.qp.QPN()), w.endpoint(remote), connectOptions)
}

// fastPath measures the fast-path rows; it returns why it could not.
func (w *workload) fastPath() string {
	iwarp := w.dev.Transport == uverbs.TransportIWARP
	if !iwarp {
		if err := w.loadGID(); err != nil {
			return err.Error()
		}
	}
	f := &fast{w: w, wc: make([]uverbs.WorkCompletion, 16)}
	var err error
	f.a, err = w.newEnd()
	defer f.a.close()
	if err == nil {
		f.b, err = w.newEnd()
		defer f.b.close()
	}
	switch {
	case err == nil && iwarp:
		// iWARP QPs reach RTS only through rdma_cm.
		var done func()
		if done, err = w.connectCM(f.a, f.b); err == nil {
			defer done() // before the ends close (deferred last, runs first)
		}
	case err == nil:
		if err = w.connect(f.a, f.b.qp.QPN()); err == nil {
			err = w.connect(f.b, f.a.qp.QPN())
		}
	}
	if err != nil {
		return fmt.Sprintf("no connected RC pair on %s: %v", w.dev.Name, err)
	}
	// A receive posted and consumed tells whether the provider has a fast path.
	if _, err := f.b.qp.PostRecv([]uverbs.RecvWR{{SGL: []uverbs.SGE{f.b.sge(0, 64)}}}); err != nil {
		if errors.Is(err, uverbs.ErrNotSupported) {
			return fmt.Sprintf("goverbs has no %v fast path yet (%v)", w.dev.Driver, err)
		}
		return err.Error()
	}
	if err := f.sendAndReap(); err != nil {
		return err.Error()
	}
	if err := f.run(); err != nil {
		w.b.skipRest("", "not reached: "+err.Error())
		return ""
	}
	if w.overheadOn {
		if w.b.verbose != nil {
			fmt.Fprintln(w.b.verbose, "ibvcost: recorder overhead")
		}
		ov, err := f.overhead()
		if err != nil {
			fmt.Fprintf(w.stderr, "ibvcost: recorder overhead: %v\n", err)
		}
		w.b.rep.Overhead = ov
	}
	return ""
}

// sendAndReap sends 8 bytes inline from A to B, consuming one of B's
// receives, and reaps both completions.
func (f *fast) sendAndReap() error {
	wr := []uverbs.SendWR{{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | uverbs.SendInline, SGL: []uverbs.SGE{f.a.sge(0, 8)}}}
	if _, err := f.a.qp.PostSend(wr); err != nil {
		return err
	}
	if err := f.reap(f.a.scq, 1); err != nil {
		return err
	}
	return f.reap(f.b.rcq, 1)
}

// reap polls cq until n successful completions came.
func (f *fast) reap(cq *uverbs.CQ, n int) error {
	var deadline time.Time
	for n > 0 {
		k, err := cq.Poll(f.wc[:min(n, len(f.wc))])
		if err != nil {
			return err
		}
		for _, c := range f.wc[:k] {
			if c.Status != uverbs.WCSuccess {
				return fmt.Errorf("completion of wr %d: status %d", c.ID, c.Status)
			}
		}
		n -= k
		if k == 0 {
			if deadline.IsZero() {
				deadline = time.Now().Add(waitLimit)
			} else if time.Now().After(deadline) {
				return fmt.Errorf("%d completions missing after %v", n, waitLimit)
			}
		}
	}
	return nil
}

func (f *fast) run() error {
	w, b, a, rb, ctx := f.w, f.w.b, f.a, f.b, f.w.ctx
	recv := []uverbs.RecvWR{{SGL: []uverbs.SGE{rb.sge(0, fastBuf/2)}}}

	// PostSend by opcode and size: one signaled WR on an idle QP; the
	// completion (and for SEND the receive) is reaped outside the timing.
	for _, op := range opNames {
		for _, z := range msgSizes {
			wr := []uverbs.SendWR{{Opcode: op.op, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, z)},
				RemoteAddr: rb.addr(0), RKey: rb.mr.RKey()}}
			if z == 8 && op.op != uverbs.WRRDMARead {
				wr[0].Flags |= uverbs.SendInline
			}
			name := postSendRow(op.name, z)
			err := b.cycle(w.n, func(p *phase) error {
				if op.op == uverbs.WRSend {
					if _, err := rb.qp.PostRecv(recv); err != nil {
						return err
					}
				}
				if err := p.do(name, ctx, func() error { _, err := a.qp.PostSend(wr); return err }); err != nil {
					return err
				}
				if err := f.reap(a.scq, 1); err != nil {
					return err
				}
				if op.op == uverbs.WRSend {
					return f.reap(rb.rcq, 1)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}

	// PostRecv, PollCQ: a call costs less than reading the clock (under
	// TCG, far less), so a sample is a batch timed as one and divided.
	// post_recv: 32 receives, one per call, consumed by 32 SENDs outside
	// the timing.
	recvs := make([]uverbs.RecvWR, batchRecv)
	for i := range recvs {
		recvs[i] = uverbs.RecvWR{ID: uint64(i), SGL: []uverbs.SGE{rb.sge(0, 64)}}
	}
	if err := b.cycle(w.n, func(p *phase) error {
		if err := p.call("post_recv", ctx, batchRecv, func(*uverbs.Recorder) (bool, error) {
			for i := range recvs {
				if _, err := rb.qp.PostRecv(recvs[i : i+1]); err != nil {
					return false, err
				}
			}
			return true, nil
		}); err != nil {
			return err
		}
		for range batchRecv {
			if err := f.sendAndReap(); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("post_recv: %w", err)
	}

	// poll_cq_empty: 100 polls of an empty CQ (16 entries asked each).
	wc := f.wc
	if err := b.cycle(w.n, func(p *phase) error {
		return p.call("poll_cq_empty", ctx, batchPoll, func(*uverbs.Recorder) (bool, error) {
			for range batchPoll {
				n, err := a.scq.Poll(wc)
				if err == nil && n != 0 {
					err = errorf("poll of an idle CQ returned %d completions", n)
				}
				if err != nil {
					return false, err
				}
			}
			return true, nil
		})
	}); err != nil {
		return fmt.Errorf("poll_cq_empty: %w", err)
	}

	// poll_cq: 16 polls, each returning one completion (one entry asked).
	// 16 signaled 8-byte inline WRITEs are posted and left 2 ms to complete
	// outside the timing (sleepThread: the thread sleeps as verbs_cost.c's
	// does); a batch in which a poll found nothing is discarded (and the
	// wait doubled).
	write8 := []uverbs.SendWR{{Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled | uverbs.SendInline,
		SGL: []uverbs.SGE{a.sge(0, 8)}, RemoteAddr: rb.addr(0), RKey: rb.mr.RKey()}}
	settle := 2 * time.Millisecond
	discarded := 0
	if err := b.cycle(w.n, func(p *phase) error {
		for {
			for range batchHit {
				if _, err := a.qp.PostSend(write8); err != nil {
					return err
				}
			}
			sleepThread(settle)
			got := 0
			err := p.call("poll_cq", ctx, batchHit, func(*uverbs.Recorder) (bool, error) {
				for range batchHit {
					n, err := a.scq.Poll(wc[:1])
					if err != nil {
						return false, err
					}
					if n == 0 {
						break
					}
					if wc[0].Status != uverbs.WCSuccess {
						return false, errorf("completion status %d", wc[0].Status)
					}
					got++
				}
				return got == batchHit, nil
			})
			if err != nil {
				return err
			}
			if got == batchHit {
				return nil
			}
			if err := f.reap(a.scq, batchHit-got); err != nil {
				return err
			}
			if discarded++; discarded > 10*(w.n+b.counted) {
				return errorf("%d batches of %d completions not complete after %v", discarded, batchHit, settle)
			}
			settle = min(2*settle, time.Second)
		}
	}); err != nil {
		return fmt.Errorf("poll_cq: %w", err)
	}

	// Ping-pong: A sends 64 bytes, B answers with 64 bytes; a sample is the
	// round trip, from A's post to A's receive completion. Receives are
	// reposted and send completions reaped outside the timing.
	sendA := []uverbs.SendWR{{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 64)}}}
	sendB := []uverbs.SendWR{{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{rb.sge(0, 64)}}}
	recvA := []uverbs.RecvWR{{SGL: []uverbs.SGE{a.sge(fastBuf/2, 64)}}}
	if _, err := a.qp.PostRecv(recvA); err != nil {
		return err
	}
	if _, err := rb.qp.PostRecv(recv); err != nil {
		return err
	}
	spin := func(cq *uverbs.CQ) error {
		deadline := time.Time{}
		for {
			n, err := cq.Poll(wc[:1])
			if err != nil {
				return err
			}
			if n == 1 {
				if wc[0].Status != uverbs.WCSuccess {
					return errorf("completion status %d", wc[0].Status)
				}
				return nil
			}
			if deadline.IsZero() {
				deadline = time.Now().Add(waitLimit)
			} else if time.Now().After(deadline) {
				return errorf("no completion after %v", waitLimit)
			}
		}
	}
	if err := b.cycle(w.n, func(p *phase) error {
		if err := p.do("pingpong_send_64B", ctx, func() error {
			if _, err := a.qp.PostSend(sendA); err != nil {
				return err
			}
			if err := spin(rb.rcq); err != nil {
				return err
			}
			if _, err := rb.qp.PostSend(sendB); err != nil {
				return err
			}
			return spin(a.rcq)
		}); err != nil {
			return err
		}
		if _, err := a.qp.PostRecv(recvA); err != nil {
			return err
		}
		if _, err := rb.qp.PostRecv(recv); err != nil {
			return err
		}
		if err := f.reap(a.scq, 1); err != nil {
			return err
		}
		return f.reap(rb.scq, 1)
	}); err != nil {
		return fmt.Errorf("pingpong: %w", err)
	}
	// Leave B with no receive posted: the next rows send none.
	if err := f.sendAndReap(); err != nil {
		return err
	}

	// Message rate: chunks of 256 64-byte WRITEs, one per PostSend, at
	// most 32 outstanding, every 8th signaled; a sample is a chunk's time
	// (its completions all reaped) per message.
	wrs := [2][]uverbs.SendWR{
		{{Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{a.sge(0, 64)}, RemoteAddr: rb.addr(0), RKey: rb.mr.RKey()}},
		{{Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 64)}, RemoteAddr: rb.addr(0), RKey: rb.mr.RKey()}},
	}
	rate := func() error {
		outstanding := 0
		for i := range chunk {
			for outstanding >= window {
				n, err := a.scq.Poll(wc)
				if err != nil {
					return err
				}
				for _, c := range wc[:n] {
					if c.Status != uverbs.WCSuccess {
						return errorf("completion status %d", c.Status)
					}
				}
				outstanding -= n * signalGap
			}
			sig := 0
			if i%signalGap == signalGap-1 {
				sig = 1
			}
			if _, err := a.qp.PostSend(wrs[sig]); err != nil {
				return err
			}
			outstanding++
		}
		return f.reap(a.scq, outstanding/signalGap)
	}
	if err := b.cycle(w.n, func(p *phase) error {
		return p.call("msg_rate_write_64B", ctx, chunk, func(*uverbs.Recorder) (bool, error) { return true, rate() })
	}); err != nil {
		return fmt.Errorf("msg_rate: %w", err)
	}
	return nil
}

// sleepThread sleeps d in one nanosleep(2) on the calling thread, as
// verbs_cost.c waits: the thread keeps its CPU and the goroutine its P
// (ibvcost runs locked to its thread). A time.Sleep would park the
// goroutine, hand its P to another thread for the timer and hand it back
// to wake it, so the polls timed next would also measure that hand-over
// (two threads woken, possibly on the other CPU) where rdma-core's measure
// none.
func sleepThread(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}
