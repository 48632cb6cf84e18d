package mlx5_test

import (
	"testing"

	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
)

// TestCQPollConsumerIndexAtEnd: a CQPoll pass tells the device its consumer
// index once, at End, as libibverbs' mlx5 writes the doorbell record at
// ibv_end_poll; Poll writes it on every call.
func TestCQPollConsumerIndexAtEnd(t *testing.T) {
	d, dev := newModel(t, nil, model.Options{})
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	before := d.CQNs()
	cq := n.cq(64, nil)
	var cqn uint32
	for _, x := range d.CQNs() {
		found := false
		for _, y := range before {
			found = found || x == y
		}
		if !found {
			cqn = x
		}
	}
	other := n.cq(16, nil)
	a, b := n.qp(uverbs.QPTypeRC, cq, cap1), n.qp(uverbs.QPTypeRC, other, cap1)
	connect(t, a, b.QPN(), lidTo(d))
	connect(t, b, a.QPN(), lidTo(d))
	wrs := make([]uverbs.SendWR, 8)
	for i := range wrs {
		wrs[i] = uverbs.SendWR{ID: uint64(i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			RemoteAddr: n.addr(65536), RKey: n.mr.RKey(), SGL: []uverbs.SGE{n.sge(0, 8)}}
	}
	if _, err := a.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	for d.Stats().CQEs < 8 {
	}
	ci := func() uint32 {
		t.Helper()
		v, ok := d.CQConsumerIndex(cqn)
		if !ok {
			t.Fatalf("no CQ %d on the device", cqn)
		}
		return v
	}
	p := cq.StartPoll()
	for i := 0; i < 5; i++ {
		if !p.Next() || p.ID() != uint64(i) {
			t.Fatalf("Next %d: id %d, %v", i, p.ID(), p.End())
		}
		if got := ci(); got != 0 {
			t.Errorf("after Next %d the doorbell record says %d; the pass has not ended", i, got)
		}
	}
	if err := p.End(); err != nil {
		t.Fatal(err)
	}
	if got := ci(); got != 5 {
		t.Errorf("after End: consumer index %d, want 5", got)
	}
	wc := make([]uverbs.WorkCompletion, 2)
	if k, err := cq.Poll(wc); k != 2 || err != nil {
		t.Fatalf("Poll = %d, %v", k, err)
	}
	if got := ci(); got != 7 {
		t.Errorf("after Poll of 2: consumer index %d, want 7", got)
	}
	p = cq.StartPoll()
	for p.Next() {
	}
	p.End()
	if got := ci(); got != 8 {
		t.Errorf("after the last pass: consumer index %d, want 8", got)
	}
}
