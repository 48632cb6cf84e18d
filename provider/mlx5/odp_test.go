package mlx5_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// TestODP: an explicit on-demand-paging MR on the model (Options.ODP):
// the device reports ODP (general ODP_SUPPORT, RC write/read), REG_MR with
// ON_DEMAND registers memory the CPU never touched, an RDMA WRITE into it
// lands and an RDMA READ into it (a local write through the ODP MR) lands;
// once a page of it is unmapped, a WRITE there fails (the fault cannot be
// resolved: a remote access error). A device without ODP refuses
// ON_DEMAND with ErrNotSupported before the kernel. (Implicit ODP:
// TestImplicitODP; ADVISE_MR: TestAdviseMR.)
func TestODP(t *testing.T) {
	ps := mmap.PageSize()
	d, dev := newModel(t, nil, model.Options{ODP: true})
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	a0, err := n.ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if a0.ODPCaps.General&uverbs.ODPSupport == 0 || a0.ODPCaps.RC&(uverbs.ODPSupportWrite|uverbs.ODPSupportRead) != uverbs.ODPSupportWrite|uverbs.ODPSupportRead {
		t.Fatalf("ODP caps %+v: want ODP_SUPPORT and RC write and read", a0.ODPCaps)
	}
	// Three pages of this test's own (not an mmap.Region, whose Close
	// would unmap the third page again after the test unmapped it, and
	// whatever mapping had taken its place by then).
	mem, err := unix.Mmap(-1, 0, 3*ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := n.pd.RegMR(mem, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead|uverbs.AccessOnDemand)
	if err != nil {
		t.Fatalf("RegMR(OnDemand): %v", err)
	}
	base := uint64(mr.Addr())
	// Last: the first two pages go (the third is unmapped below).
	defer unix.Syscall(unix.SYS_MUNMAP, uintptr(base), uintptr(2*ps), 0)
	defer mr.Close()
	cq := n.cq(16, nil)
	a, b := n.qp(uverbs.QPTypeRC, cq, cap1), n.qp(uverbs.QPTypeRC, cq, cap1)
	connect(t, a, b.QPN(), lidTo(d))
	connect(t, b, a.QPN(), lidTo(d))
	src := n.buf.Bytes()
	for i := range src[:512] {
		src[i] = byte(i*3 + 1)
	}
	post := func(wr uverbs.SendWR) uverbs.WorkCompletion {
		t.Helper()
		if _, err := a.PostSend([]uverbs.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
		return poll(t, cq, 1)[0]
	}
	w := post(uverbs.SendWR{ID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, RemoteAddr: base + 100, RKey: mr.RKey(), SGL: []uverbs.SGE{n.sge(0, 256)}})
	ok(t, w, 1, uverbs.WCRDMAWrite)
	if !bytes.Equal(mem[100:356], src[:256]) {
		t.Errorf("the WRITE into the untouched ODP page did not land")
	}
	// READ n's buffer into the ODP MR's second page (the local side's
	// SGE is the ODP MR).
	w = post(uverbs.SendWR{ID: 2, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled, RemoteAddr: n.addr(256), RKey: n.mr.RKey(),
		SGL: []uverbs.SGE{{Addr: base + uint64(ps), Length: 256, LKey: mr.LKey()}}})
	ok(t, w, 2, uverbs.WCRDMARead)
	if !bytes.Equal(mem[ps:ps+256], src[256:512]) {
		t.Errorf("the READ into the ODP MR did not land")
	}
	// The third page goes away: a fault there cannot be resolved.
	// (x/sys's Munmap takes only what its own Mmap made: the raw call.)
	if _, _, e := unix.Syscall(unix.SYS_MUNMAP, uintptr(base)+uintptr(2*ps), uintptr(ps), 0); e != 0 {
		t.Fatal(e)
	}
	w = post(uverbs.SendWR{ID: 3, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, RemoteAddr: base + uint64(2*ps), RKey: mr.RKey(), SGL: []uverbs.SGE{n.sge(0, 64)}})
	if w.ID != 3 || w.Status != uverbs.WCRemAccessErr {
		t.Errorf("WRITE into an unmapped page of the ODP MR: %+v, want a remote access error", w)
	}

	if m2, err := n.pd.RegMR(mem[:ps], uverbs.AccessLocalWrite|uverbs.AccessOnDemand|uverbs.AccessMWBind|uverbs.AccessRemoteAtomic); err != nil {
		t.Errorf("a second ODP MR: %v", err)
	} else {
		defer m2.Close()
	}

	// ADVISE_MR of the unmapped page (TestAdviseMR has the rest): the
	// write fault cannot be resolved.
	if err := n.pd.AdviseMR(uverbs.AdvicePrefetchWrite, uverbs.AdviseFlush, []uverbs.SGE{{Addr: base + uint64(2*ps), Length: uint32(ps), LKey: mr.LKey()}}); !errors.Is(err, unix.EFAULT) {
		t.Errorf("AdviseMR(PREFETCH_WRITE, FLUSH) of the unmapped page: %v, want EFAULT", err)
	}

	nd, ndev := newModel(t, nil, model.Options{})
	nn := openNode(t, nd, ndev, uverbs.OpenOptions{})
	if _, err := nn.pd.RegMR(nn.buf.Bytes()[:ps], uverbs.AccessLocalWrite|uverbs.AccessOnDemand); !errors.Is(err, uverbs.ErrNotSupported) {
		t.Errorf("RegMR(OnDemand) without ODP: %v, want ErrNotSupported", err)
	}
}
