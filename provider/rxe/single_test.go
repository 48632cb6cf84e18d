package rxe

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// TestSingleThreaded: a single-threaded QP's own queues have their locks
// off (an SRQ's stays on), a CQ created single-threaded says so, and both
// work as the locked ones do:
// posts reach the queues, completions come out in order across wraps, a
// resize remaps, and after Close every call reports ErrClosed.
func TestSingleThreaded(t *testing.T) {
	fk, c := testContext(t)
	qp := testQP(t, fk, c, qpSpec{single: true})
	if !qp.sq.mu.Off || !qp.rq.mu.Off {
		t.Errorf("single-threaded QP: send lock off %v, receive lock off %v; want both off", qp.sq.mu.Off, qp.rq.mu.Off)
	}
	if locked := testQP(t, fk, c, qpSpec{handle: 8}); locked.sq.mu.Off || locked.rq.mu.Off {
		t.Errorf("a QP without the promise has a lock off")
	}
	if srqQP := testQP(t, fk, c, qpSpec{handle: 9, srq: true, single: true}); srqQP.rq != nil || !srqQP.sq.mu.Off {
		t.Errorf("single-threaded QP on an SRQ: rq %v, send lock off %v", srqQP.rq, srqQP.sq.mu.Off)
	}

	sge := []provider.SGE{{Addr: 0x1000, Length: 64, LKey: 5}}
	for i := range uint64(40) { // the queues hold 15: past their ends twice
		if n, err := qp.PostRecv([]provider.RecvWR{{ID: i, SGL: sge}}); n != 1 || err != nil {
			t.Fatalf("PostRecv %d = %d, %v", i, n, err)
		}
		if n, err := qp.PostSend([]provider.SendWR{{ID: i, Opcode: provider.WRSend, SGL: sge}}); n != 1 || err != nil {
			t.Fatalf("PostSend %d = %d, %v", i, n, err)
		}
		// The kernel takes both entries.
		qp.sq.q.cons.Store(qp.sq.q.prod.Load())
		qp.rq.q.cons.Store(qp.rq.q.prod.Load())
	}

	cq, kq := testCQAttr(t, fk, c, 8, 7, provider.CQAttr{SingleThreaded: true})
	if !cq.single {
		t.Fatal("CQAttr.SingleThreaded did not make a single-threaded CQ")
	}
	var wc [4]provider.WorkCompletion
	next := uint64(0)
	for round := range 10 {
		for i := range 5 {
			putWC(kq, abi.IbUverbsWc{WrId: uint64(round*5 + i)})
		}
		for got := 0; got < 5; {
			n, err := cq.Poll(wc[:])
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range wc[:n] {
				if w.ID != next {
					t.Fatalf("completion %d, want %d", w.ID, next)
				}
				next++
			}
			got += n
		}
	}

	st, nq := beginResize(t, fk, cq)
	putWC(nq, abi.IbUverbsWc{WrId: 99})
	if _, err := st.Complete(31); err != nil {
		t.Fatal(err)
	}
	if n, err := cq.Poll(wc[:]); n != 1 || err != nil || wc[0].ID != 99 {
		t.Errorf("after resize: Poll = %d, %v, %+v", n, err, wc[0])
	}

	if err := cq.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cq.Poll(wc[:]); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("Poll after Close: %v, want ErrClosed", err)
	}
	if err := qp.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := qp.PostSend([]provider.SendWR{{ID: 1, Opcode: provider.WRSend, SGL: sge}}); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("PostSend after Close: %v, want ErrClosed", err)
	}
	if _, err := qp.PostRecv([]provider.RecvWR{{ID: 1, SGL: sge}}); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("PostRecv after Close: %v, want ErrClosed", err)
	}
}
