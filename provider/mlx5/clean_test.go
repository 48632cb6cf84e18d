package mlx5_test

import (
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// waitFor polls cq until it has n completions or the deadline passes, and
// returns what it got (fewer than n only on timeout).
func waitFor(t testing.TB, cq *uverbs.CQ, n int, d time.Duration) []uverbs.WorkCompletion {
	t.Helper()
	got := make([]uverbs.WorkCompletion, 0, n)
	wc := make([]uverbs.WorkCompletion, n)
	deadline := time.Now().Add(d)
	for len(got) < n && time.Now().Before(deadline) {
		k, err := cq.Poll(wc[:n-len(got)])
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		got = append(got, wc[:k]...)
		if k == 0 {
			time.Sleep(50 * time.Microsecond)
		}
	}
	return got
}

// TestResetDropsStaleCompletions: a QP whose receives were flushed (ERR)
// is reset before its flush completions are polled, then reconnected. The
// flush CQEs of the old incarnation must not complete the new receives:
// the provider removes a reset QP's CQEs from its CQs, as rdma-core's
// mlx5_modify_qp does with __mlx5_cq_clean. Without that the new receive
// completes as WR_FLUSH_ERR and the real completion is dropped.
func TestResetDropsStaleCompletions(t *testing.T) {
	for _, c := range []struct {
		name    string
		v       int  // model.Options.MaxCQEVersion
		success bool // a successful receive is left unpolled too
	}{{"cqe1", 1, false}, {"cqe1+success", 1, true}, {"cqe0", -1, false}, {"cqe0+success", -1, true}} {
		t.Run(c.name, func(t *testing.T) {
			d, dev := newModel(t, nil, model.Options{MaxCQEVersion: c.v})
			n := openNode(t, d, dev, uverbs.OpenOptions{})
			cqA, cqB := n.cq(64, nil), n.cq(64, nil)
			a, b := n.qp(uverbs.QPTypeRC, cqA, cap1), n.qp(uverbs.QPTypeRC, cqB, cap1)
			connect(t, a, b.QPN(), grhTo(d))
			connect(t, b, a.QPN(), grhTo(d))
			recv := func(id uint64) {
				t.Helper()
				if _, err := b.PostRecv([]uverbs.RecvWR{{ID: id, SGL: []uverbs.SGE{n.sge(4096, 64)}}}); err != nil {
					t.Fatal(err)
				}
			}
			// Perhaps a send that completes B's receive 1, unpolled; then
			// receives 2 and 3 flushed by ERR, left unpolled too.
			if c.success {
				recv(1)
				if _, err := a.PostSend([]uverbs.SendWR{{ID: 100, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{n.sge(0, 8)}}}); err != nil {
					t.Fatal(err)
				}
				ok(t, poll(t, cqA, 1)[0], 100, uverbs.WCSend)
			}
			recv(2)
			recv(3)
			if err := b.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Millisecond) // let the model write the flushes
			if err := b.Modify(&uverbs.QPAttr{State: uverbs.QPStateReset}, uverbs.QPAttrState); err != nil {
				t.Fatal(err)
			}
			connect(t, b, a.QPN(), grhTo(d))
			recv(4)
			if _, err := a.PostSend([]uverbs.SendWR{{ID: 101, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{n.sge(0, 24)}}}); err != nil {
				t.Fatal(err)
			}
			ok(t, poll(t, cqA, 1)[0], 101, uverbs.WCSend)
			got := waitFor(t, cqB, 2, 100*time.Millisecond)
			if len(got) != 1 || got[0].ID != 4 || got[0].Status != uverbs.WCSuccess || got[0].Opcode != uverbs.WCRecv || got[0].ByteLen != 24 {
				t.Errorf("after RESET and reconnect, B's CQ holds %+v; want only receive 4 of the 24-byte send, successful", got)
			}
		})
	}
}

// TestDestroyReturnsSRQSlots: a QP attached to an SRQ consumes SRQ WQEs and
// is destroyed before its receive completions are polled. Its CQEs are
// removed from the CQ and the WQEs they hold go back to the SRQ's free
// list (rdma-core's mlx5_destroy_qp → __mlx5_cq_clean → mlx5_free_srq_wqe);
// without that each such QP leaks SRQ slots until "the SRQ is full".
func TestDestroyReturnsSRQSlots(t *testing.T) {
	for _, v := range []int{1, -1} {
		t.Run(map[int]string{1: "cqe1", -1: "cqe0"}[v], func(t *testing.T) {
			d, dev := newModel(t, nil, model.Options{MaxCQEVersion: v})
			n := openNode(t, d, dev, uverbs.OpenOptions{})
			srq, err := n.pd.CreateSRQ(uverbs.SRQInit{MaxWR: 3, MaxSGE: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srq.Close() })
			depth := int(srq.MaxWR())
			cqA, cqB := n.cq(64, nil), n.cq(64, nil)
			a := n.qp(uverbs.QPTypeRC, cqA, cap1)
			id := uint64(0)
			post := func() error {
				id++
				_, err := srq.PostRecv([]uverbs.RecvWR{{ID: id, SGL: []uverbs.SGE{n.sge(4096, 64)}}})
				return err
			}
			for i := 0; i < depth; i++ {
				if err := post(); err != nil {
					t.Fatalf("filling the SRQ (%d WQEs): receive %d: %v", depth, i, err)
				}
			}
			for round := 0; round < depth+1; round++ {
				b, err := n.pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: cqB, RecvCQ: cqB, SRQ: srq,
					Cap: uverbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1}})
				if err != nil {
					t.Fatal(err)
				}
				connect(t, a, b.QPN(), grhTo(d))
				connect(t, b, a.QPN(), grhTo(d))
				if _, err := a.PostSend([]uverbs.SendWR{{ID: 200, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{n.sge(0, 8)}}}); err != nil {
					t.Fatal(err)
				}
				ok(t, poll(t, cqA, 1)[0], 200, uverbs.WCSend) // B's receive CQE is written
				if err := b.Close(); err != nil {
					t.Fatal(err)
				}
				if err := a.Modify(&uverbs.QPAttr{State: uverbs.QPStateReset}, uverbs.QPAttrState); err != nil {
					t.Fatal(err)
				}
				if got := waitFor(t, cqB, 1, 20*time.Millisecond); len(got) != 0 {
					t.Errorf("round %d: the destroyed QP's completion %+v was delivered", round, got)
				}
				if err := post(); err != nil {
					if errors.Is(err, unix.ENOMEM) {
						t.Fatalf("round %d: the destroyed QP's SRQ WQE was not returned: %v", round, err)
					}
					t.Fatal(err)
				}
			}
		})
	}
}
