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

// TestODPRig: on a device without on-demand paging (siw; rxe up to Linux
// 6.12 at least: its source has no rxe_odp.c, 7.3.4's has) RegMR with
// AccessOnDemand, AdviseMR and RegImplicitODP are refused with
// ErrNotSupported by their capability checks (RegImplicitODP's reads the
// attributes the test's QueryDevice kept and sends no REG_MR), and sent
// anyway the kernel refuses them itself: REG_MR with ON_DEMAND, explicit or
// implicit, is EINVAL on 6.1 (ib_check_mr_access without
// IBK_ON_DEMAND_PAGING; newer kernels may say EOPNOTSUPP), and ADVISE_MR of
// the MR object is the handler's EOPNOTSUPP for a driver without advise_mr
// (the method exists for every device), which AdviseMR reports as
// ErrNotSupported. Where the device reports ODP (rxe on 7.3.4), the ODP MR
// registers and takes RDMA WRITEs, AdviseMR behaves as rxe's advise_mr
// defines (adviseRig), and RegImplicitODP is refused by the capability
// check unless the device reports implicit ODP (rxe does not), and
// registers if it does.
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
				// One packet (the path MTU is 1024) at a page's start:
				// asserted. Four packets: on Debian's 7.3.4 the WRITE
				// completes successfully but each packet's payload is
				// copied to the start of its page (rxe_odp.c's
				// __rxe_odp_mr_copy computes the offset in the page and
				// copies to the page's first byte: seen in the rig, session
				// 15, adviseRig), so only a write at a page's start that
				// fits one packet lands; that is logged, not asserted.
				if !odpWrite(t, c, pd, plain, r.Bytes()[:1024], mr, len(b2)-8192, b2[len(b2)-8192:len(b2)-8192+1024]) {
					t.Errorf("a one-packet RDMA WRITE into the ODP MR did not land")
				}
				if !odpWrite(t, c, pd, plain, r.Bytes()[:4096], mr, len(b2)-4096, b2[len(b2)-4096:]) {
					t.Logf("KERNEL DEFECT: a 4-packet RDMA WRITE into rxe's ODP MR completed successfully but did not land whole")
				}
				implicitRig(t, c, pd, a)
				adviseRig(t, c, pd, plain, r.Bytes())
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
// a: refused by the capability check (no syscall: the context has queried
// the device already; no REG_MR) where they lack implicit ODP, registered
// where they have it.
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
	if n := c.Syscalls() - before; n != 0 {
		t.Errorf("RegImplicitODP's refusal took %d syscalls, want 0 (its capability check reads the attributes TestODPRig's QueryDevice kept)", n)
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
		s[i] = byte(i*7 + 1 + i>>10*0x35) // no two 1 KiB packets alike
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

// adviseRig checks AdviseMR on a device with ODP against rxe's advise_mr
// (rxe_odp.c, Linux 7.3; core/umem_odp.c):
//   - PREFETCH_WRITE with FLUSH is synchronous (rxe_ib_prefetch_sg_list):
//     it succeeds over the whole ODP MR, faulting its pages in writable
//     (ib_umem_odp_map_dma_and_lock with HMM_PFN_WRITE), so an RDMA WRITE
//     into pages the CPU never touched lands without a fault of its own;
//   - a range reaching past the MR's last page is EFAULT
//     (ib_umem_odp_map_dma_and_lock's bounds check), reported because of
//     FLUSH;
//   - each key is looked up first (lookup_mr with IB_ACCESS_LOCAL_WRITE):
//     a key of no MR is EINVAL, with FLUSH or without (the asynchronous
//     path takes its references before queueing), and so is any prefetch,
//     even a read prefetch, of an ODP MR registered without local write
//     (rxe answers EINVAL there where mlx5 answers EPERM for a write
//     prefetch only);
//   - without FLUSH a valid request is queued and answers nothing else.
//
// plain is a registered MR over src, the source of the RDMA WRITEs. A
// non-ODP MR's key is never advised: rxe's prefetch does not check that the
// MR is an ODP one before treating its umem as one.
func adviseRig(t *testing.T, c *Context, pd *PD, plain *MR, src []byte) {
	t.Helper()
	r, err := mmap.Anonymous(1 << 16) // never touched by the CPU before the device writes it
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	mr, err := pd.RegMR(r.Bytes(), AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessOnDemand)
	if err != nil {
		t.Fatalf("RegMR(OnDemand): %v", err)
	}
	defer mr.Close()
	whole := []SGE{{Addr: mr.Addr(), Length: 1 << 16, LKey: mr.LKey()}}
	if err := pd.AdviseMR(AdvicePrefetchWrite, AdviseFlush, whole); err != nil {
		t.Fatalf("AdviseMR(PREFETCH_WRITE, FLUSH) of the whole ODP MR: %v", err)
	}
	b := r.Bytes()
	// Pages 3 and 5 were faulted in by the prefetch alone.
	if !odpWrite(t, c, pd, plain, src[:1024], mr, 3<<12, b[3<<12:3<<12+1024]) {
		t.Errorf("a one-packet RDMA WRITE into a prefetched page did not land")
	}
	// A write that does not start at its page's first byte: logged, as the
	// multi-packet write is, because rxe's ODP copy (__rxe_odp_mr_copy in
	// 7.3) computes the offset in the page and then copies to the page's
	// start; where the payload went is logged.
	if odpWrite(t, c, pd, plain, src[:4096], mr, 5<<12, b[5<<12:6<<12]) {
		t.Logf("a 4-packet RDMA WRITE into a prefetched page landed whole")
	} else {
		t.Logf("KERNEL DEFECT: a 4-packet RDMA WRITE into a prefetched page of rxe's ODP MR completed successfully but did not land whole")
		odpWhere(t, b[5<<12:6<<12], src[3072:4096], "its last packet")
	}
	if odpWrite(t, c, pd, plain, src[:512], mr, 7<<12+1024, b[7<<12+1024:7<<12+1536]) {
		t.Logf("a one-packet RDMA WRITE at offset 1024 of a prefetched page landed")
	} else {
		t.Logf("KERNEL DEFECT: a one-packet RDMA WRITE at offset 1024 of a prefetched page of rxe's ODP MR completed successfully but did not land there")
		odpWhere(t, b[7<<12:8<<12], src[:512], "its payload")
	}
	past := []SGE{{Addr: mr.Addr() + 15<<12, Length: 2 << 12, LKey: mr.LKey()}}
	if err := pd.AdviseMR(AdvicePrefetchWrite, AdviseFlush, past); !errors.Is(err, unix.EFAULT) {
		t.Errorf("AdviseMR(PREFETCH_WRITE, FLUSH) of a range past the MR's end: %v, want EFAULT", err)
	}
	bad := []SGE{{Addr: mr.Addr(), Length: 4096, LKey: mr.LKey() ^ 1}} // the MR's index, another key byte
	for _, flags := range []uint32{AdviseFlush, 0} {
		if err := pd.AdviseMR(AdvicePrefetchWrite, flags, bad); !errors.Is(err, unix.EINVAL) {
			t.Errorf("AdviseMR(PREFETCH_WRITE, flags %d) of a key of no MR: %v, want EINVAL", flags, err)
		}
	}
	if err := pd.AdviseMR(AdvicePrefetch, 0, whole); err != nil {
		t.Errorf("AdviseMR(PREFETCH) without FLUSH: %v, want nil (queued)", err)
	}
	ro, err := pd.RegMR(r.Bytes(), AccessOnDemand)
	if err != nil {
		t.Fatalf("RegMR(OnDemand) without write access: %v", err)
	}
	defer ro.Close()
	for _, advice := range []MRAdvice{AdvicePrefetch, AdvicePrefetchWrite} {
		err := pd.AdviseMR(advice, AdviseFlush, []SGE{{Addr: ro.Addr(), Length: 4096, LKey: ro.LKey()}})
		if !errors.Is(err, unix.EINVAL) {
			t.Errorf("AdviseMR(%d, FLUSH) of an ODP MR without local write: %v, want EINVAL (lookup_mr)", advice, err)
		}
	}
}

// odpWhere logs whether p, the bytes of a write that did not land where it
// was sent, sits at the start of page instead.
func odpWhere(t *testing.T, page, p []byte, what string) {
	t.Helper()
	if bytes.Equal(page[:len(p)], p) {
		t.Logf("  %s is at the start of the page", what)
	} else {
		t.Logf("  %s is not at the start of the page either: % x", what, page[:8])
	}
}
