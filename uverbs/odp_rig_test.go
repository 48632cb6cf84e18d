package uverbs

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/mmap"
	"golang.org/x/sys/unix"
)

// TestODPRig: on a device without on-demand paging (siw; rxe before Linux
// 6.4) RegMR with AccessOnDemand, AdviseMR and RegImplicitODP are refused
// with ErrNotSupported by their capability checks (RegImplicitODP's costs
// the one QUERY_DEVICE and sends no REG_MR), and sent anyway the kernel
// refuses them itself: REG_MR with ON_DEMAND, explicit or implicit, is
// EINVAL on 6.1 (ib_check_mr_access without IBK_ON_DEMAND_PAGING; newer
// kernels may say EOPNOTSUPP), and ADVISE_MR of the MR object is the
// handler's EOPNOTSUPP for a driver without advise_mr (the method exists
// for every device), which AdviseMR reports as ErrNotSupported. Where the
// device reports ODP (rxe from 6.4), the ODP MR registers, and AdviseMR's
// prefetch either succeeds or is the kernel's EOPNOTSUPP (rxe got
// advise_mr later than ODP), which the test logs; RegImplicitODP is
// refused by the capability check unless the device reports implicit ODP
// (rxe does not), and registers if it does.
func TestODPRig(t *testing.T) {
	rigtest.Require(t)
	for _, name := range []string{"rxe0", "siw0"} {
		t.Run(name, func(t *testing.T) {
			c := openRig(t, name, PolicyAuto)
			a, err := c.QueryDevice()
			if err != nil {
				t.Fatal(err)
			}
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			defer pd.Close()
			r, err := mmap.Anonymous(1 << 16)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			plain, err := pd.RegMR(r.Bytes(), AccessLocalWrite)
			if err != nil {
				t.Fatal(err)
			}
			defer plain.Close()
			sge := []SGE{{Addr: plain.Addr(), Length: 4096, LKey: plain.LKey()}}
			t.Logf("%s ODP caps: general %v, RC %v", name, a.ODPCaps.General, a.ODPCaps.RC)
			if a.ODPCaps.General&ODPSupport != 0 {
				r2, err := mmap.Anonymous(1 << 16) // not touched before the device writes it
				if err != nil {
					t.Fatal(err)
				}
				defer r2.Close()
				mr, err := pd.RegMR(r2.Bytes(), AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessOnDemand)
				if err != nil {
					t.Fatalf("RegMR(OnDemand) on a device with ODP: %v", err)
				}
				defer mr.Close()
				b2 := r2.Bytes()
				clear(b2[len(b2)-8192 : len(b2)-4096]) // touched by the CPU first
				// One packet (the path MTU is 1024): asserted. Four packets:
				// on Debian's 7.3.4 only the first packet's payload lands
				// and the WRITE completes successfully (an rxe ODP defect
				// seen in the rig, session 4), so that is logged, not
				// asserted.
				if !odpWrite(t, c, pd, plain, r.Bytes()[:1024], mr, len(b2)-8192, b2[len(b2)-8192:len(b2)-8192+1024]) {
					t.Errorf("a one-packet RDMA WRITE into the ODP MR did not land")
				}
				if !odpWrite(t, c, pd, plain, r.Bytes()[:4096], mr, len(b2)-4096, b2[len(b2)-4096:]) {
					t.Logf("KERNEL DEFECT: a 4-packet RDMA WRITE into rxe's ODP MR completed successfully but did not land whole")
				}
				implicitRig(t, c, pd, a)
				err = pd.AdviseMR(AdvicePrefetchWrite, AdviseFlush, []SGE{{Addr: mr.Addr(), Length: 1 << 16, LKey: mr.LKey()}})
				switch {
				case err == nil:
					t.Logf("AdviseMR(PREFETCH_WRITE, FLUSH) of the ODP MR: done")
				case errors.Is(err, ErrNotSupported):
					t.Logf("AdviseMR: the kernel's driver has no advise_mr: %v", err)
				default:
					t.Errorf("AdviseMR of the ODP MR: %v", err)
				}
				return
			}
			if _, err := pd.RegMR(r.Bytes(), AccessLocalWrite|AccessOnDemand); !errors.Is(err, ErrNotSupported) {
				t.Errorf("RegMR(OnDemand) on %s: %v, want ErrNotSupported", name, err)
			}
			if err := pd.AdviseMR(AdvicePrefetch, 0, sge); !errors.Is(err, ErrNotSupported) {
				t.Errorf("AdviseMR on %s: %v, want ErrNotSupported", name, err)
			}
			implicitRig(t, c, pd, a)
			c.skipCapChecks = true
			defer func() { c.skipCapChecks = false }()
			mr, err := pd.RegMR(r.Bytes(), AccessLocalWrite|AccessOnDemand)
			if err == nil {
				mr.Close()
				t.Fatalf("%s's kernel registered an ODP MR without reporting ODP", name)
			}
			if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EOPNOTSUPP) {
				t.Errorf("REG_MR with ON_DEMAND on %s: %v, want the kernel's EINVAL or EOPNOTSUPP", name, err)
			} else {
				t.Logf("the kernel's REG_MR answer: %v", err)
			}
			imr, err := pd.RegImplicitODP(AccessLocalWrite)
			if err == nil {
				imr.Close()
				t.Fatalf("%s's kernel registered an implicit ODP MR without reporting ODP", name)
			}
			if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EOPNOTSUPP) {
				t.Errorf("REG_MR of the implicit range on %s: %v, want the kernel's EINVAL or EOPNOTSUPP", name, err)
			} else {
				t.Logf("the kernel's answer to REG_MR of the implicit range: %v", err)
			}
			before := c.Syscalls()
			err = pd.AdviseMR(AdvicePrefetch, 0, sge)
			if !errors.Is(err, ErrNotSupported) || !errors.Is(err, unix.EOPNOTSUPP) {
				t.Errorf("ADVISE_MR on %s: %v, want the handler's EOPNOTSUPP (ErrNotSupported)", name, err)
			} else {
				t.Logf("the kernel's ADVISE_MR answer (%d syscall): %v", c.Syscalls()-before, err)
			}
		})
	}
}

// implicitRig checks RegImplicitODP against the device's ODP capabilities
// a: refused by the capability check (one QUERY_DEVICE, no REG_MR) where
// they lack implicit ODP, registered where they have it.
func implicitRig(t *testing.T, c *Context, pd *PD, a DeviceAttr) {
	t.Helper()
	before := c.Syscalls()
	imr, err := pd.RegImplicitODP(AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead)
	if a.ODPCaps.General&ODPSupportImplicit != 0 {
		if err != nil {
			t.Errorf("RegImplicitODP on a device reporting implicit ODP: %v", err)
			return
		}
		t.Logf("RegImplicitODP: lkey %#x rkey %#x", imr.LKey(), imr.RKey())
		imr.Close()
		return
	}
	if !errors.Is(err, ErrNotSupported) {
		t.Errorf("RegImplicitODP without implicit ODP: %v, want ErrNotSupported", err)
	}
	if n := c.Syscalls() - before; n != 1 {
		t.Errorf("RegImplicitODP's refusal took %d syscalls, want 1 (the capability check's QUERY_DEVICE)", n)
	}
	if _, sent := c.Transports()["RegImplicitODP"]; sent {
		t.Errorf("RegImplicitODP's refusal sent a command")
	}
	if err == nil {
		imr.Close()
	}
}

// odpWrite RDMA-writes s (in the plain MR src) into the ODP MR dst at
// offset off, whose bytes are d, on a loopback RC pair, and reports
// whether they landed (the completion must be a success).
func odpWrite(t *testing.T, c *Context, pd *PD, src *MR, s []byte, dst *MR, off int, d []byte) bool {
	t.Helper()
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	cq, err := c.CreateCQ(16, CQOptions{Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	qcap := QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}
	a, err := pd.CreateQP(QPInit{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: qcap})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := pd.CreateQP(QPInit{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: qcap})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	o := ConnectOptions{Access: AccessRemoteWrite | AccessRemoteRead}
	if err := ConnectPair(a, b, 1, 1, o); err != nil {
		t.Fatalf("ConnectPair: %v", err)
	}
	for i := range s {
		s[i] = byte(i*7 + 1)
	}
	at := dst.Addr() + uint64(off)
	if _, err := a.PostSend([]SendWR{{ID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, RemoteAddr: at, RKey: dst.RKey(),
		SGL: []SGE{{Addr: src.Addr(), Length: uint32(len(s)), LKey: src.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wc := make([]WorkCompletion, 1)
	if n, err := cq.Wait(ctx, wc); n != 1 || err != nil || wc[0].Status != WCSuccess {
		t.Fatalf("RDMA WRITE into the ODP MR: %d, %v, %+v", n, err, wc[0])
	}
	if !bytes.Equal(d, s) {
		i := 0
		for i < len(d) && d[i] == s[i] {
			i++
		}
		t.Logf("the %d-byte write into the ODP MR at offset %d: the first %d bytes landed, then % x, want % x", len(s), off, i, d[i:min(i+8, len(d))], s[i:min(i+8, len(s))])
		return false
	}
	t.Logf("the %d-byte RDMA WRITE into the ODP MR at offset %d: landed", len(s), off)
	return true
}
