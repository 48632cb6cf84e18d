package mlx5_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// singleCQ is a single-threaded CQ of n (CQOptions.SingleThreaded).
func singleCQ(t testing.TB, n *node, cqe int) *uverbs.CQ {
	t.Helper()
	cq, err := n.ctx.CreateCQ(cqe, uverbs.CQOptions{SingleThreaded: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cq.Close() })
	return cq
}

// singleQP is a single-threaded RC QP on cq.
func singleQP(t testing.TB, n *node, cq *uverbs.CQ, c uverbs.QPCap) *uverbs.QP {
	t.Helper()
	qp, err := n.pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: c, SingleThreaded: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qp.Close() })
	return qp
}

// TestSingleThreadedRefusals: a single-threaded QP needs single-threaded
// CQs, and CreateQP says so without a syscall; a QP without the promise
// may complete to a single-threaded CQ.
func TestSingleThreadedRefusals(t *testing.T) {
	d, dev := newModel(t, nil, model.Options{})
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	locked, single := n.cq(16, nil), singleCQ(t, n, 16)
	for _, c := range []struct {
		name       string
		send, recv *uverbs.CQ
	}{{"locked CQs", locked, locked}, {"a locked receive CQ", single, locked}, {"a locked send CQ", locked, single}} {
		before := n.ctx.Syscalls()
		_, err := n.pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: c.send, RecvCQ: c.recv, Cap: cap1, SingleThreaded: true})
		var oe *uverbs.OpError
		if !errors.Is(err, unix.EINVAL) || !errors.As(err, &oe) || oe.Verb != "CreateQP" {
			t.Errorf("a single-threaded QP on %s: %v, want CreateQP's EINVAL", c.name, err)
		} else {
			t.Log(err)
		}
		if k := n.ctx.Syscalls() - before; k != 0 {
			t.Errorf("the refusal made %d syscalls", k)
		}
	}
	qp, err := n.pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: single, RecvCQ: single, Cap: cap1})
	if err != nil {
		t.Fatalf("a QP without the promise on single-threaded CQs: %v", err)
	}
	qp.Close()
}

// TestSingleThreaded carries traffic between two single-threaded QPs on
// one single-threaded CQ (the model's device running beside it): lists of
// one to three WRs, plain and not, over rings of four so that both queues
// wrap many times; every WR gets its one completion, in order, and every
// byte arrives. Then stuck sends are flushed by ERR, each exactly once, the
// QP is reset and carries traffic again, and after Close the fast path
// says ErrClosed.
func TestSingleThreaded(t *testing.T) {
	d, dev := newModel(t, nil, model.Options{})
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	cq := singleCQ(t, n, 64)
	c := uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 2, MaxRecvSGE: 1, MaxInlineData: 64}
	a, b := singleQP(t, n, cq, c), singleQP(t, n, cq, c)
	connect(t, a, b.QPN(), grhTo(d))
	connect(t, b, a.QPN(), grhTo(d))
	buf := n.buf.Bytes()
	for round := range 300 {
		k := 1 + round%3
		sends := make([]uverbs.SendWR, k)
		recvs := make([]uverbs.RecvWR, k)
		for i := range sends {
			src, dst := 4096*(1+i), 65536+4096*(1+i)
			for j := range 64 {
				buf[src+j] = byte(round*7 + i + j)
			}
			id := uint64(round*10 + i)
			recvs[i] = uverbs.RecvWR{ID: id, SGL: []uverbs.SGE{n.sge(dst, 64)}}
			sends[i] = uverbs.SendWR{ID: id, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{n.sge(src, 64)}}
			switch (round + i) % 3 {
			case 1: // two SGEs: not plain
				sends[i].SGL = []uverbs.SGE{n.sge(src, 32), n.sge(src+32, 32)}
			case 2: // inline: plain
				sends[i].Flags |= uverbs.SendInline
			}
		}
		for i := range recvs { // one at a time: PostRecv's one-WR path
			if m, err := b.PostRecv(recvs[i : i+1]); m != 1 || err != nil {
				t.Fatalf("round %d: PostRecv = %d, %v", round, m, err)
			}
		}
		if k == 1 {
			if m, err := a.PostSend(sends); m != 1 || err != nil {
				t.Fatalf("round %d: PostSend = %d, %v", round, m, err)
			}
		} else if m, err := a.PostSend(sends); m != k || err != nil {
			t.Fatalf("round %d: PostSend of %d = %d, %v", round, k, m, err)
		}
		var got [2][]uint64 // send and receive completions' IDs
		for _, w := range poll(t, cq, 2*k) {
			if w.Status != uverbs.WCSuccess {
				t.Fatalf("round %d: %+v", round, w)
			}
			switch w.Opcode {
			case uverbs.WCSend:
				got[0] = append(got[0], w.ID)
			case uverbs.WCRecv:
				got[1] = append(got[1], w.ID)
				if w.ByteLen != 64 {
					t.Errorf("round %d: receive %d of %d bytes", round, w.ID, w.ByteLen)
				}
			default:
				t.Fatalf("round %d: %+v", round, w)
			}
		}
		for side, ids := range got {
			for i, id := range ids {
				if id != uint64(round*10+i) || len(ids) != k {
					t.Fatalf("round %d: side %d completed %v, want %d in order", round, side, ids, k)
				}
			}
		}
		for i := range k {
			src, dst := 4096*(1+i), 65536+4096*(1+i)
			if !bytes.Equal(buf[src:src+64], buf[dst:dst+64]) {
				t.Fatalf("round %d WR %d: the received bytes differ", round, i)
			}
		}
	}

	// b has no receives: the sends wait (RNR, retried forever) until ERR
	// flushes them.
	if _, err := a.PostSend([]uverbs.SendWR{{ID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{n.sge(0, 8)}},
		{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{n.sge(0, 8)}}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if err := a.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	for i, w := range poll(t, cq, 2) {
		if w.ID != uint64(i+1) || w.Status != uverbs.WCWRFlushErr {
			t.Errorf("flush %d: %+v", i, w)
		}
	}
	if k, err := cq.Poll(make([]uverbs.WorkCompletion, 4)); k != 0 || err != nil {
		t.Errorf("after the flushes: Poll = %d, %v; want nothing more", k, err)
	}
	if err := a.Modify(&uverbs.QPAttr{State: uverbs.QPStateReset}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	connect(t, a, b.QPN(), grhTo(d))
	if _, err := b.PostRecv([]uverbs.RecvWR{{ID: 10, SGL: []uverbs.SGE{n.sge(65536, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PostSend([]uverbs.SendWR{{ID: 3, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{n.sge(0, 8)}}}); err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for _, w := range poll(t, cq, 2) {
		if w.Status != uverbs.WCSuccess {
			t.Errorf("after the reset: %+v", w)
		}
		seen[w.ID] = true
	}
	if !seen[3] || !seen[10] {
		t.Errorf("after the reset: completions %v, want 3 and 10", seen)
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PostSend([]uverbs.SendWR{{ID: 4, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{n.sge(0, 8)}}}); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("PostSend after Close: %v, want ErrClosed", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cq.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cq.Poll(make([]uverbs.WorkCompletion, 1)); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Poll after Close: %v, want ErrClosed", err)
	}
}
