package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/uverbs"
)

// newChannel creates a completion channel on the receiving side.
func newChannel(t *testing.T, e *env) *uverbs.CompChannel {
	ch, err := e.b.ctx.CreateCompChannel()
	if err != nil {
		t.Fatalf("CreateCompChannel: %v", err)
	}
	t.Cleanup(func() { ch.Close() }) // after the CQs (cleanups run last-in first-out)
	return ch
}

func (e *env) waitEvent(t *testing.T, ch *uverbs.CompChannel, want *uverbs.CQ) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), e.o.Timeout)
	defer cancel()
	cq, err := ch.Wait(ctx)
	if err != nil {
		t.Fatalf("CompChannel.Wait: %v", err)
	}
	if cq != want {
		t.Fatalf("event for CQ %d, want CQ %d", cq.Handle(), want.Handle())
	}
}

func noEvent(t *testing.T, ch *uverbs.CompChannel, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if cq, err := ch.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CompChannel.Wait: CQ %v, %v; want no event", cq, err)
	}
}

func testEvents(t *testing.T, e *env) {
	ch := newChannel(t, e)
	a := e.newEnd(t, e.a, qpConfig{})
	b := e.newEnd(t, e.b, qpConfig{channel: ch})
	e.link(t, a, b, qpConfig{})
	postRecv(t, b.qp, recvList(b, []uint64{1, 2, 3})...)
	if err := b.cq.ReqNotify(false); err != nil {
		t.Fatalf("ReqNotify: %v", err)
	}
	post(t, a.qp, sendList(a, []uint64{1}, uverbs.SendSignaled)...)
	e.waitEvent(t, ch, b.cq)
	e.wait(t, b.cq, 1)
	if n := b.cq.Events(); n != 1 {
		t.Errorf("%d events counted, want 1", n)
	}
	// Not re-armed: a completion makes no event.
	post(t, a.qp, sendList(a, []uint64{2}, uverbs.SendSignaled)...)
	e.wait(t, b.cq, 1)
	noEvent(t, ch, 200*time.Millisecond)
	// Re-armed: one event again, however many completions follow.
	if err := b.cq.ReqNotify(false); err != nil {
		t.Fatalf("ReqNotify: %v", err)
	}
	post(t, a.qp, sendList(a, []uint64{3}, uverbs.SendSignaled)...)
	e.waitEvent(t, ch, b.cq)
	e.wait(t, b.cq, 1)
	e.wait(t, a.cq, 3)
}

func testSolicited(t *testing.T, e *env) {
	ch := newChannel(t, e)
	a := e.newEnd(t, e.a, qpConfig{})
	b := e.newEnd(t, e.b, qpConfig{channel: ch})
	e.link(t, a, b, qpConfig{})
	postRecv(t, b.qp, recvList(b, []uint64{1, 2})...)
	if err := b.cq.ReqNotify(true); err != nil {
		t.Fatalf("ReqNotify(solicited): %v", err)
	}
	post(t, a.qp, sendList(a, []uint64{1}, uverbs.SendSignaled)...)
	e.wait(t, b.cq, 1)
	noEvent(t, ch, 200*time.Millisecond)
	post(t, a.qp, sendList(a, []uint64{2}, uverbs.SendSignaled|uverbs.SendSolicited)...)
	if e.o.IWARP {
		// siw raises no event for a solicited receive on a CQ armed for
		// solicited completions only: siw_rqe_complete hands
		// siw_cq_notify_now SIW_WQE_SIGNALLED, never the SOLICITED flag
		// siw_rdmap_complete sets (Linux 6.1 to 6.12; libsiw alike). The
		// completion arrives, and a CQ armed for any completion gets
		// its event.
		e.wait(t, b.cq, 1)
		noEvent(t, ch, 200*time.Millisecond)
		t.Log("siw: no event for a solicited receive under a solicited-only arm (kernel: siw_rqe_complete)")
		if err := b.cq.ReqNotify(false); err != nil {
			t.Fatalf("ReqNotify: %v", err)
		}
		postRecv(t, b.qp, recvList(b, []uint64{3})...)
		post(t, a.qp, sendList(a, []uint64{3}, uverbs.SendSignaled|uverbs.SendSolicited)...)
		e.waitEvent(t, ch, b.cq)
		e.wait(t, b.cq, 1)
		e.wait(t, a.cq, 3)
		return
	}
	e.waitEvent(t, ch, b.cq)
	e.wait(t, b.cq, 1)
	e.wait(t, a.cq, 2)
}

func testCQWait(t *testing.T, e *env) {
	ch := newChannel(t, e)
	a := e.newEnd(t, e.a, qpConfig{})
	b := e.newEnd(t, e.b, qpConfig{channel: ch})
	e.link(t, a, b, qpConfig{})
	postRecv(t, b.qp, recvList(b, []uint64{1, 2, 3, 4})...)
	for round := uint64(1); round <= 4; round++ {
		done := make(chan struct{})
		go func() {
			defer close(done)
			time.Sleep(20 * time.Millisecond)
			if _, err := a.qp.PostSend(sendList(a, []uint64{round}, uverbs.SendSignaled)); err != nil {
				t.Error(err)
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), e.o.Timeout)
		wc := make([]uverbs.WorkCompletion, 4)
		n, err := b.cq.Wait(ctx, wc)
		cancel()
		<-done
		if err != nil || n != 1 {
			t.Fatalf("round %d: CQ.Wait = %d, %v", round, n, err)
		}
		expect(t, wc[0], round, uverbs.WCSuccess, uverbs.WCRecv)
	}
	e.wait(t, a.cq, 4)
}

// testAllocs: the fast path allocates nothing on this device, with the
// requests and completions written as literals and stack arrays.
func testAllocs(t *testing.T, e *env) {
	const runs = 100
	cp := uverbs.QPCap{MaxSendWR: 256, MaxRecvWR: 256, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}
	a, b := e.pair(t, qpConfig{cap: cp, cqe: 1024})
	// The requests and the completion array are written the way a program
	// writes them, literals in the call: they stay on the stack.
	if n := e.allocsPerRun(runs, func() {
		if _, err := b.qp.PostRecv([]uverbs.RecvWR{{ID: 1, SGL: []uverbs.SGE{b.buf.sge(0, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("PostRecv: %v allocations per call", n)
	}
	if n := e.allocsPerRun(runs, func() {
		if _, err := a.qp.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{a.buf.sge(0, 16)}}}); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("PostSend: %v allocations per call", n)
	}
	e.wait(t, a.cq, runs+1)
	time.Sleep(10 * time.Millisecond)
	got := 0
	deadline := time.Now().Add(e.o.Timeout)
	if n := e.allocsPerRun(runs, func() {
		for {
			var wc [1]uverbs.WorkCompletion
			k, err := b.cq.Poll(wc[:])
			if err != nil {
				t.Fatal(err)
			}
			if k > 0 || time.Now().After(deadline) {
				got += k
				return
			}
		}
	}); n != 0 {
		t.Errorf("Poll: %v allocations per call", n)
	}
	if got != runs+1 {
		t.Errorf("polled %d completions, want %d", got, runs+1)
	}
	if n := e.allocsPerRun(runs, func() {
		var wc [4]uverbs.WorkCompletion
		b.cq.Poll(wc[:])
	}); n != 0 {
		t.Errorf("Poll of an empty CQ: %v allocations per call", n)
	}
}
