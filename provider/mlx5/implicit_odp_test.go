package mlx5_test

import (
	"bytes"
	"errors"
	"math"
	"runtime"
	"testing"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// TestImplicitODP: the implicit ODP MR on the model (Options.ImplicitODP,
// mlx5_ib_alloc_implicit_mr): the device reports ODP_SUPPORT_IMPLICIT;
// RegImplicitODP registers one key (lkey = rkey) over the whole address
// space; an RDMA WRITE through its rkey lands in memory never registered
// otherwise (faulting the page in), an RDMA READ lands there through its
// lkey; ADVISE_MR prefetches through it (a prefetched page takes a WRITE
// without a fault) and refuses a range past the address space's end
// (EFAULT); a WRITE to an unmapped address, past the end of the address
// space, or a READ of memory the process cannot write (the writable MR
// faults pages in for writing) is a remote access error, and nothing is
// written.
func TestImplicitODP(t *testing.T) {
	ps := mmap.PageSize()
	p := newODPPair(t, model.Options{ImplicitODP: true})
	n, d := p.n, p.d
	a, err := n.ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if a.ODPCaps.General&(uverbs.ODPSupport|uverbs.ODPSupportImplicit) != uverbs.ODPSupport|uverbs.ODPSupportImplicit {
		t.Fatalf("ODP caps %v: want ODP_SUPPORT and ODP_SUPPORT_IMPLICIT", a.ODPCaps.General)
	}
	imr, err := n.pd.RegImplicitODP(uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead)
	if err != nil {
		t.Fatalf("RegImplicitODP: %v", err)
	}
	defer imr.Close()
	if imr.LKey() != imr.RKey() || imr.Addr() != 0 || imr.IOVA() != 0 || imr.Len() != math.MaxInt || imr.Access()&uverbs.AccessOnDemand == 0 {
		t.Errorf("implicit MR: lkey %#x rkey %#x addr %#x iova %#x len %d access %v", imr.LKey(), imr.RKey(), imr.Addr(), imr.IOVA(), imr.Len(), imr.Access())
	}
	om := odpMem(t, 4)
	mem := om.mem
	base := addrOf(mem)

	// WRITE through the rkey into a page nothing registered.
	f0 := d.Stats().ODPFaults
	src := p.write(t, imr.RKey(), base+16, 256, uverbs.WCSuccess)
	if !bytes.Equal(mem[16:272], src) {
		t.Errorf("the WRITE through the implicit rkey did not land")
	}
	if f := d.Stats().ODPFaults - f0; f != 1 || d.ODPPage(imr.RKey(), base) != model.ODPWrite {
		t.Errorf("the WRITE faulted %d pages (want 1), page now %v (want write)", f, d.ODPPage(imr.RKey(), base))
	}
	// READ through the lkey: the node's buffer into page 1.
	w := p.post(t, uverbs.SendWR{ID: 2, Opcode: uverbs.WRRDMARead, RemoteAddr: n.addr(1024), RKey: n.mr.RKey(),
		SGL: []uverbs.SGE{imr.SGE(int(base)+ps, 128)}})
	ok(t, w, 2, uverbs.WCRDMARead)
	if !bytes.Equal(mem[ps:ps+128], n.buf.Bytes()[1024:1024+128]) {
		t.Errorf("the READ through the implicit lkey did not land")
	}

	// ADVISE_MR through the implicit MR.
	if err := n.pd.AdviseMR(uverbs.AdvicePrefetchWrite, uverbs.AdviseFlush, []uverbs.SGE{imr.SGE(int(base)+2*ps, ps)}); err != nil {
		t.Fatalf("AdviseMR(PREFETCH_WRITE, FLUSH) through the implicit MR: %v", err)
	}
	if s := d.ODPPage(imr.LKey(), base+uint64(2*ps)); s != model.ODPWrite {
		t.Errorf("page 2 after PREFETCH_WRITE: %v, want write", s)
	}
	f1 := d.Stats().ODPFaults
	p.write(t, imr.RKey(), base+uint64(2*ps), 64, uverbs.WCSuccess)
	if f := d.Stats().ODPFaults - f1; f != 0 {
		t.Errorf("a WRITE into the prefetched page faulted %d pages, want 0", f)
	}
	// The implicit MR ends with TASK_SIZE's power of two
	// (mlx5_imr_ksm_entries children of 1 GiB).
	end := uint64(1 << 47)
	if runtime.GOARCH == "arm64" {
		end = 1 << 48
	}
	if err := n.pd.AdviseMR(uverbs.AdvicePrefetch, uverbs.AdviseFlush, []uverbs.SGE{{Addr: end - 64, Length: 128, LKey: imr.LKey()}}); !errors.Is(err, unix.EFAULT) {
		t.Errorf("AdviseMR past the implicit MR's end: %v, want EFAULT", err)
	}

	// Unmapped: page 3 goes away.
	om.unmap(t, 3)
	p.write(t, imr.RKey(), base+uint64(3*ps), 64, uverbs.WCRemAccessErr)
	// The error moved the pair to the error state: a fresh pair.
	p.reconnect(t)
	p.write(t, imr.RKey(), end, 64, uverbs.WCRemAccessErr)
	p.reconnect(t)
	// Read-only memory: a READ through the writable implicit MR needs a
	// write fault, which the mapping refuses.
	rom := odpMem(t, 1).mem
	rom[0] = 0x5a
	if err := unix.Mprotect(rom, unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	w = p.post(t, uverbs.SendWR{ID: 3, Opcode: uverbs.WRRDMARead, RemoteAddr: addrOf(rom), RKey: imr.RKey(), SGL: []uverbs.SGE{p.n.sge(4096, 64)}})
	if w.Status != uverbs.WCRemAccessErr {
		t.Errorf("READ of read-only memory through the writable implicit MR: %v, want a remote access error", w.Status)
	}
}

// TestImplicitODPRefusals: RegImplicitODP on a device with ODP but not
// implicit ODP, and on one without ODP, is ErrNotSupported by the
// capability check: the QUERY_DEVICE, no REG_MR; AccessZeroBased and
// remote write without local write are refused before the kernel.
func TestImplicitODPRefusals(t *testing.T) {
	for _, o := range []model.Options{{ODP: true}, {}} {
		d, dev := newModel(t, nil, o)
		n := openNode(t, d, dev, uverbs.OpenOptions{})
		before := n.ctx.Syscalls()
		if _, err := n.pd.RegImplicitODP(uverbs.AccessLocalWrite); !errors.Is(err, uverbs.ErrNotSupported) {
			t.Errorf("RegImplicitODP with %+v: %v, want ErrNotSupported", o, err)
		}
		if s := n.ctx.Syscalls() - before; s != 1 {
			t.Errorf("RegImplicitODP with %+v: %d syscalls, want 1 (the capability check's QUERY_DEVICE)", o, s)
		}
		if _, sent := n.ctx.Transports()["RegImplicitODP"]; sent {
			t.Errorf("RegImplicitODP with %+v sent a command", o)
		}
	}
	d, dev := newModel(t, nil, model.Options{ImplicitODP: true})
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	for _, acc := range []uverbs.Access{uverbs.AccessZeroBased, uverbs.AccessRemoteWrite} {
		before := n.ctx.Syscalls()
		if _, err := n.pd.RegImplicitODP(acc); !errors.Is(err, unix.EINVAL) || n.ctx.Syscalls() != before {
			t.Errorf("RegImplicitODP(%v): %v after %d syscalls, want EINVAL before any", acc, err, n.ctx.Syscalls()-before)
		}
	}
}
