package uverbs

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/internal/rigtest"
	"golang.org/x/sys/unix"
)

// TestXRCRig: rxe and siw have no XRC, so an XRC initiator QP, an XRC SRQ
// (CreateSRQEx) and, with no domain to be had, target QPs and OpenQP are
// refused with ErrNotSupported by the capability check before any
// command. The kernel's own answers to an XRC_INI CREATE_QP sent anyway,
// by the write command and by the ioctl QP_CREATE method (which CreateQP
// takes first), are logged and must be errors; the context goes on
// working.
func TestXRCRig(t *testing.T) {
	rigtest.Require(t)
	for _, name := range []string{"rxe0", "siw0"} {
		t.Run(name, func(t *testing.T) {
			c := openRig(t, name, PolicyAuto)
			a, err := c.QueryDevice()
			if err != nil {
				t.Fatal(err)
			}
			if a.CapFlags&DeviceXRC != 0 {
				t.Fatalf("%s reports XRC (%v): this kernel has it; the test expects none", name, a.CapFlags)
			}
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			defer pd.Close()
			cq, err := c.CreateCQ(16, CQOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer cq.Close()
			before := c.Syscalls()
			if _, err := pd.CreateQP(QPInit{Type: QPTypeXRCIni, SendCQ: cq, Cap: QPCap{MaxSendWR: 4, MaxSendSGE: 1}}); !errors.Is(err, ErrNotSupported) {
				t.Errorf("CreateQP(XRC_INI) on %s: %v, want ErrNotSupported", name, err)
			} else {
				t.Logf("CreateQP(XRC_INI) refused: %v", err)
			}
			if _, err := pd.CreateSRQEx(SRQInitEx{Type: SRQTypeXRC, SRQInit: SRQInit{MaxWR: 4, MaxSGE: 1}, CQ: cq}); !errors.Is(err, ErrNotSupported) {
				t.Errorf("CreateSRQEx(XRC) on %s: %v, want ErrNotSupported", name, err)
			} else {
				t.Logf("CreateSRQEx(XRC) refused: %v", err)
			}
			if n := c.Syscalls() - before; n != 0 {
				t.Errorf("the refusals made %d syscalls, want 0 (the checks read the attributes the QueryDevice above kept)", n)
			}
			// The kernel itself, asked for an initiator QP (no driver data).
			req := abi.IbUverbsCreateQp{PdHandle: pd.handle, SendCqHandle: cq.handle, RecvCqHandle: cq.handle,
				MaxSendWr: 4, MaxSendSge: 1, QpType: uint8(QPTypeXRCIni)}
			var resp abi.IbUverbsCreateQpResp
			err = c.invoke("CreateQP", &abi.Command{Num: abi.IB_USER_VERBS_CMD_CREATE_QP, In: abi.Bytes(&req), Out: abi.Bytes(&resp)})
			if err == nil {
				d := abi.IbUverbsDestroyQp{QpHandle: resp.QpHandle}
				var dr abi.IbUverbsDestroyQpResp
				c.invoke("DestroyQP", &abi.Command{Num: abi.IB_USER_VERBS_CMD_DESTROY_QP, In: abi.Bytes(&d), Out: abi.Bytes(&dr)})
				t.Fatalf("%s's kernel created an XRC_INI QP (QPN %d)", name, resp.Qpn)
			}
			t.Logf("the kernel's answer to CREATE_QP(XRC_INI): %v", err)
			// The same by the ioctl QP_CREATE method, which CreateQP takes
			// for an initiator first (PD and send CQ, no receive CQ, no
			// driver data). The kernel must refuse it too; if it lacked
			// the method (EPROTONOSUPPORT) CreateQP would fall back to the
			// write command above.
			var capOut abi.IbUverbsQpCap
			capIn := abi.IbUverbsQpCap{MaxSendWr: 4, MaxSendSge: 1}
			b := abi.NewIoctl(abi.UVERBS_OBJECT_QP, abi.UVERBS_METHOD_QP_CREATE)
			h := b.NewObject(abi.UVERBS_ATTR_CREATE_QP_HANDLE)
			b.Handle(abi.UVERBS_ATTR_CREATE_QP_PD_HANDLE, pd.handle)
			b.Handle(abi.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, cq.handle)
			b.Uint64In(abi.UVERBS_ATTR_CREATE_QP_USER_HANDLE, 1)
			b.PtrIn(abi.UVERBS_ATTR_CREATE_QP_CAP, abi.Bytes(&capIn))
			b.Uint64In(abi.UVERBS_ATTR_CREATE_QP_TYPE, uint64(QPTypeXRCIni))
			b.PtrOutLen(abi.UVERBS_ATTR_CREATE_QP_RESP_CAP, len(abi.Bytes(&capOut)))
			b.PtrOutLen(abi.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, 4)
			tr, err := c.ioctl("CreateQP", b, nil)
			if err == nil {
				d := abi.NewIoctl(abi.UVERBS_OBJECT_QP, abi.UVERBS_METHOD_QP_DESTROY)
				d.Handle(abi.UVERBS_ATTR_DESTROY_QP_HANDLE, uint32(b.Result(h)))
				d.PtrOutLen(abi.UVERBS_ATTR_DESTROY_QP_RESP, 4)
				c.ioctl("DestroyQP", d, nil)
				d.Release()
				b.Release()
				t.Fatalf("%s's kernel created an XRC_INI QP by QP_CREATE", name)
			}
			b.Release()
			if errors.Is(err, unix.EPROTONOSUPPORT) {
				t.Errorf("the kernel has no QP_CREATE method (%v): every rig kernel (5.10 on) has it", err)
			}
			t.Logf("the kernel's answer to QP_CREATE(XRC_INI) by %v: %v", tr, err)
			q, err := pd.CreateQP(QPInit{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if err != nil {
				t.Fatalf("CreateQP(RC) after the refusals: %v", err)
			}
			q.Close()
		})
	}
}
