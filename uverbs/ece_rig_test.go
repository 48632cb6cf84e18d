package uverbs

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/internal/rigtest"
)

// TestECERig: rxe and siw have no ECE in user space (libibverbs' default
// query_ece and set_ece answer EOPNOTSUPP for their providers; the
// kernel's ECE lives in the mlx5 driver data and in rdma_cm), so
// QP.QueryECE and QP.SetECE are ErrNotSupported without a syscall; nor a
// data-in-order query (no uverbs method; libibverbs' default answers 0):
// QueryDataInOrder is 0 and ErrNotSupported. The QP goes on working (a
// Modify after them succeeds).
func TestECERig(t *testing.T) {
	rigtest.Require(t)
	for _, name := range []string{"rxe0", "siw0"} {
		t.Run(name, func(t *testing.T) {
			c := openRig(t, name, PolicyAuto)
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			defer pd.Close()
			cq, err := c.CreateCQ(8, CQOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer cq.Close()
			qp, err := pd.CreateQP(QPInit{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if err != nil {
				t.Fatal(err)
			}
			defer qp.Close()
			before := c.Syscalls()
			if _, err := qp.QueryECE(); !errors.Is(err, ErrNotSupported) {
				t.Errorf("QueryECE on %s: %v, want ErrNotSupported", name, err)
			} else {
				t.Logf("%v", err)
			}
			for _, e := range []ECE{{VendorID: 0x15b3, Options: 0x10000000}, {}} {
				if err := qp.SetECE(e); !errors.Is(err, ErrNotSupported) {
					t.Errorf("SetECE(%+v) on %s: %v, want ErrNotSupported", e, name, err)
				} else {
					t.Logf("%v", err)
				}
			}
			// No data-in-order query either: 0 (no guarantee), and
			// ErrNotSupported.
			if caps, err := qp.QueryDataInOrder(WRRDMAWrite, DataInOrderReturnCaps); caps != 0 || !errors.Is(err, ErrNotSupported) {
				t.Errorf("QueryDataInOrder on %s: %v, %v; want 0, ErrNotSupported", name, caps, err)
			} else {
				t.Logf("%v", err)
			}
			if n := c.Syscalls() - before; n != 0 {
				t.Errorf("the refusals made %d syscalls, want 0", n)
			}
			if err := qp.Modify(&QPAttr{State: QPStateInit, PortNum: 1, AccessFlags: AccessRemoteWrite}, QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags); err != nil {
				t.Errorf("Modify to INIT after the refusals: %v", err)
			}
		})
	}
}
