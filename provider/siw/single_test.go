package siw

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// TestSingleThreaded: a single-threaded QP's own queues have their locks
// off (an SRQ's stays on), a CQ created single-threaded says so, and both
// work as the locked ones do: sends reach the ring past its end (with the
// doorbell rule's rings), receives likewise, completions come out in order
// across wraps, and after Close every call reports ErrClosed.
func TestSingleThreaded(t *testing.T) {
	fk, c := testContext(t)
	qp, sq, rq := testQPAttr(t, fk, c, 4, 4, provider.QPAttr{Type: provider.QPTypeRC, SingleThreaded: true})
	if !qp.sq.mu.Off || !qp.rq.mu.off {
		t.Errorf("single-threaded QP: send lock off %v, receive lock off %v; want both off", qp.sq.mu.Off, qp.rq.mu.off)
	}
	if locked, _, _ := testQP(t, fk, c, 4, 4, false, false); locked.sq.mu.Off || locked.rq.mu.off {
		t.Errorf("a QP without the promise has a lock off")
	}
	onSRQ, _, _ := testQPAttr(t, fk, c, 4, 0, provider.QPAttr{Type: provider.QPTypeRC, SRQ: &SRQ{}, SingleThreaded: true})
	if onSRQ.rq != nil || !onSRQ.sq.mu.Off {
		t.Errorf("single-threaded QP on an SRQ: rq %v, send lock off %v", onSRQ.rq, onSRQ.sq.mu.Off)
	}

	qp.Modified(provider.QPStateRTS)
	sge := []provider.SGE{{Addr: 0x1000, Length: 64, LKey: 5}}
	var sget uint32
	for i := range uint64(10) { // rings of 4: past their ends twice
		before := fk.doorbells.Load()
		if n, err := qp.PostSend([]provider.SendWR{{ID: i, Opcode: provider.WRSend, SGL: sge}}); n != 1 || err != nil {
			t.Fatalf("PostSend %d = %d, %v", i, n, err)
		}
		if fk.doorbells.Load() != before+1 { // the kernel took the entry before: a doorbell each time
			t.Fatalf("PostSend %d rang %d doorbells, want 1", i, fk.doorbells.Load()-before)
		}
		if sq.sqe(uint32(i)).Id != i || kernelTake(sq, &sget) != 1 {
			t.Fatalf("send entry %d: id %d, or not valid", i, sq.sqe(uint32(i)).Id)
		}
		if n, err := qp.PostRecv([]provider.RecvWR{{ID: 100 + i, SGL: sge}}); n != 1 || err != nil {
			t.Fatalf("PostRecv %d = %d, %v", i, n, err)
		}
		w := rq.word(uint32(i), offRqFlags)
		if rq.rqe(uint32(i)).Id != 100+i || w.Load()&wqeValid == 0 {
			t.Fatalf("receive entry %d: id %d, flags %#x", i, rq.rqe(uint32(i)).Id, w.Load())
		}
		w.Store(0) // the kernel takes it
	}

	cq, kcq := testCQAttr(t, fk, c, 8, provider.CQAttr{SingleThreaded: true})
	if !cq.single {
		t.Fatal("CQAttr.SingleThreaded did not make a single-threaded CQ")
	}
	var wc [3]provider.WorkCompletion
	put, next := uint32(0), uint64(0)
	for range 10 {
		for range 5 {
			kernelComplete(kcq, put, uint64(put), abi.SIW_OP_SEND, 0, 64, 9)
			put++
		}
		for got := 0; got < 5; {
			n, err := cq.Poll(wc[:])
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range wc[:n] {
				if w.ID != next || w.Status != provider.WCSuccess || w.Opcode != provider.WCSend {
					t.Fatalf("completion %+v, want ID %d, a successful SEND", w, next)
				}
				next++
			}
			got += n
		}
	}
	if n, err := cq.Poll(wc[:]); n != 0 || err != nil {
		t.Errorf("Poll of an empty CQ = %d, %v", n, err)
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
