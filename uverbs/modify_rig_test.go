package uverbs_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/uverbs"
)

// TestModifyResolvedRig: ModifyResolved moves an RC QP on rxe0 through
// Connect's steps, its RTR carrying an address vector (the command rdma_cm's
// dialer makes after its last wait, a raw syscall on a software device),
// to RTS, each step one command, and it checks a mask as Modify does.
func TestModifyResolvedRig(t *testing.T) {
	rigtest.Require(t)
	rigtest.Device(t, "rxe0")
	d, err := uverbs.DeviceByName("rxe0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := uverbs.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	cq, err := c.CreateCQ(16, uverbs.CQOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	qp, err := pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer qp.Close()
	if err := qp.ModifyResolved(&uverbs.QPAttr{}, 0); err == nil {
		t.Error("ModifyResolved with an empty mask succeeded")
	}
	local, err := qp.Endpoint(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range uverbs.ConnectSteps(uverbs.QPTypeRC, local, local, uverbs.ConnectOptions{}) {
		n := c.Syscalls()
		if err := qp.ModifyResolved(&s.Attr, s.Mask); err != nil {
			t.Fatalf("ModifyResolved to %v (mask %v): %v", s.Attr.State, s.Mask, err)
		}
		if got := c.Syscalls() - n; got != 1 {
			t.Errorf("ModifyResolved to %v made %d syscalls, want 1", s.Attr.State, got)
		}
		if st := qp.State(); st != s.Attr.State {
			t.Errorf("State after ModifyResolved to %v: %v", s.Attr.State, st)
		}
	}
	a, _, err := qp.Query(uverbs.QPAttrState)
	if err != nil {
		t.Fatal(err)
	}
	if a.State != uverbs.QPStateRTS {
		t.Errorf("the kernel has the QP in %v, want RTS", a.State)
	}
}
