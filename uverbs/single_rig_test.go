package uverbs

import (
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"golang.org/x/sys/unix"
)

// TestSingleThreadedRig: on rxe, whose single-threaded queues take no lock
// and whose single-threaded CQs' Poll does not count itself (siw's
// likewise), single-threaded CQs and QPs work as any others: CreateQP
// refuses a single-threaded QP on a CQ without the promise (EINVAL, no
// syscall), takes one without it on single-threaded CQs, and a loopback
// pair of single-threaded QPs carries SENDs, each completing once, across a
// resize of both CQs, then flushes a receive on ERR. siw creates them too
// (its RC QPs carry data only once rdma_cm connects them; the fake-kernel
// TestSingleThreaded in provider/siw runs its lock-free paths).
func TestSingleThreadedRig(t *testing.T) {
	rigtest.Require(t)
	t.Run("rxe0", func(t *testing.T) {
		e := newEvEnv(t, "rxe0")
		locked := e.cq(t, 16, nil)
		single := func() *CQ {
			cq, err := e.ctx.CreateCQ(64, CQOptions{SingleThreaded: true})
			if err != nil {
				t.Fatalf("CreateCQ single-threaded: %v", err)
			}
			t.Cleanup(func() { cq.Close() })
			return cq
		}
		ca, cb := single(), single()
		qpCap := QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}
		before := e.ctx.Syscalls()
		_, err := e.pd.CreateQP(QPInit{Type: QPTypeRC, SendCQ: ca, RecvCQ: locked, Cap: qpCap, SingleThreaded: true})
		if !errors.Is(err, unix.EINVAL) {
			t.Errorf("a single-threaded QP on a locked receive CQ: %v, want EINVAL", err)
		}
		if n := e.ctx.Syscalls() - before; n != 0 {
			t.Errorf("the refusal made %d syscalls", n)
		}
		if q, err := e.pd.CreateQP(QPInit{Type: QPTypeRC, SendCQ: ca, RecvCQ: ca, Cap: qpCap}); err != nil {
			t.Errorf("a QP without the promise on single-threaded CQs: %v", err)
		} else {
			q.Close()
		}
		qp := func(cq *CQ) *QP {
			q, err := e.pd.CreateQP(QPInit{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: qpCap, SingleThreaded: true})
			if err != nil {
				t.Fatalf("CreateQP single-threaded: %v", err)
			}
			t.Cleanup(func() { q.Close() })
			return q
		}
		a, b := qp(ca), qp(cb)
		e.pair(t, a, b)
		wc := make([]WorkCompletion, 4)
		// await polls cq until it has one completion, which must be id's
		// with status st.
		await := func(cq *CQ, id uint64, st WCStatus) {
			t.Helper()
			deadline := time.Now().Add(evTimeout)
			for {
				n, err := cq.Poll(wc[:1])
				if err != nil {
					t.Fatalf("Poll: %v", err)
				}
				if n == 1 {
					if wc[0].ID != id || wc[0].Status != st {
						t.Fatalf("completion %+v, want ID %d status %v", wc[0], id, st)
					}
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("no completion for ID %d in %v", id, evTimeout)
				}
			}
		}
		for i := range uint64(40) { // five times round each ring
			e.recv(t, b, nil, 1000+i)
			e.send(t, a, i)
			await(ca, i, WCSuccess)
			await(cb, 1000+i, WCSuccess)
		}
		for _, cq := range []*CQ{ca, cb} {
			if n, err := cq.Poll(wc); n != 0 || err != nil {
				t.Errorf("after the traffic: Poll = %d, %v, want nothing more", n, err)
			}
			// A resize remaps the queue the lock-free Poll reads.
			if err := cq.Resize(128); err != nil {
				t.Fatalf("Resize: %v", err)
			}
		}
		for i := range uint64(10) {
			e.recv(t, b, nil, 1500+i)
			e.send(t, a, 500+i)
			await(ca, 500+i, WCSuccess)
			await(cb, 1500+i, WCSuccess)
		}
		e.recv(t, b, nil, 2000)
		if err := b.Modify(&QPAttr{State: QPStateErr}, QPAttrState); err != nil {
			t.Fatal(err)
		}
		await(cb, 2000, WCWRFlushErr)
	})
	t.Run("siw0", func(t *testing.T) {
		c := openRig(t, "siw0", PolicyAuto)
		pd, err := c.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		defer pd.Close()
		cq, err := c.CreateCQ(8, CQOptions{SingleThreaded: true})
		if err != nil {
			t.Fatal(err)
		}
		defer cq.Close()
		q, err := pd.CreateQP(QPInit{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, SingleThreaded: true,
			Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
