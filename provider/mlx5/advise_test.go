package mlx5_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// odpMemory is n pages of a test's own, never touched (not an
// mmap.Region: the tests unmap and protect single pages of it).
type odpMemory struct {
	mem  []byte
	gone []bool // pages the test unmapped: their addresses may be another mapping's by cleanup
}

// odpMem maps n pages, unmapped at cleanup (but for those unmapped by
// unmap).
func odpMem(t *testing.T, n int) *odpMemory {
	t.Helper()
	mem, err := unix.Mmap(-1, 0, n*mmap.PageSize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	m := &odpMemory{mem: mem, gone: make([]bool, n)}
	t.Cleanup(func() {
		for i, g := range m.gone {
			if !g {
				m.unmapRaw(i)
			}
		}
	})
	return m
}

func (m *odpMemory) unmapRaw(i int) unix.Errno {
	ps := mmap.PageSize()
	// x/sys's Munmap takes only what its own Mmap made whole: the raw call.
	_, _, e := unix.Syscall(unix.SYS_MUNMAP, uintptr(addrOf(m.mem))+uintptr(i*ps), uintptr(ps), 0)
	return e
}

// unmap unmaps page i now.
func (m *odpMemory) unmap(t *testing.T, i int) {
	t.Helper()
	if e := m.unmapRaw(i); e != 0 {
		t.Fatal(e)
	}
	m.gone[i] = true
}

// resident reports whether the process has the page at b present (the
// present bit of its /proc/self/pagemap entry).
func resident(t *testing.T, b []byte) bool {
	t.Helper()
	return pagemapEntry(t, b)&(1<<63) != 0
}

// pagemapEntry is /proc/self/pagemap's entry for the page holding b[0].
func pagemapEntry(t *testing.T, b []byte) uint64 {
	t.Helper()
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var e [8]byte
	if _, err := f.ReadAt(e[:], int64(addrOf(b)/uint64(mmap.PageSize())*8)); err != nil {
		t.Fatal(err)
	}
	return binary.NativeEndian.Uint64(e[:])
}

// odpPair is a node on an ODP model with a connected RC pair a→b on one
// CQ.
type odpPair struct {
	n    *node
	d    *model.Device
	a, b *uverbs.QP
	cq   *uverbs.CQ
}

func newODPPair(t *testing.T, o model.Options) *odpPair {
	d, dev := newModel(t, nil, o)
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	cq := n.cq(16, nil)
	a, b := n.qp(uverbs.QPTypeRC, cq, cap1), n.qp(uverbs.QPTypeRC, cq, cap1)
	connect(t, a, b.QPN(), lidTo(d))
	connect(t, b, a.QPN(), lidTo(d))
	return &odpPair{n: n, d: d, a: a, b: b, cq: cq}
}

// reconnect replaces the pair (after an error moved it to the error
// state) by a new one on the same node and CQ.
func (p *odpPair) reconnect(t *testing.T) {
	p.a, p.b = p.n.qp(uverbs.QPTypeRC, p.cq, cap1), p.n.qp(uverbs.QPTypeRC, p.cq, cap1)
	connect(t, p.a, p.b.QPN(), lidTo(p.d))
	connect(t, p.b, p.a.QPN(), lidTo(p.d))
}

// post posts wr on a and returns its completion.
func (p *odpPair) post(t *testing.T, wr uverbs.SendWR) uverbs.WorkCompletion {
	t.Helper()
	wr.Flags |= uverbs.SendSignaled
	if _, err := p.a.PostSend([]uverbs.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	return poll(t, p.cq, 1)[0]
}

// write RDMA-writes n bytes of the node's buffer (a pattern) to addr
// through rkey and checks the completion's status.
func (p *odpPair) write(t *testing.T, rkey uint32, addr uint64, n int, want uverbs.WCStatus) []byte {
	t.Helper()
	src := p.n.buf.Bytes()[:n]
	for i := range src {
		src[i] = byte(i*5 + 3)
	}
	w := p.post(t, uverbs.SendWR{ID: 7, Opcode: uverbs.WRRDMAWrite, RemoteAddr: addr, RKey: rkey, SGL: []uverbs.SGE{p.n.sge(0, n)}})
	if w.Status != want {
		t.Errorf("RDMA WRITE of %d bytes to %#x (rkey %#x): %v, want %v", n, addr, rkey, w.Status, want)
	}
	return src
}

const odpAccess = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessOnDemand

// TestAdviseMR: ADVISE_MR on the model with ODP (mlx5_ib_advise_mr): the
// ioctl goes to the MR object; PREFETCH with FLUSH faults the pages in
// (the process has them resident afterwards) and maps them for reading
// only; PREFETCH_WRITE maps them for writing; PREFETCH_NO_FAULT maps the
// page the CPU wrote and leaves the untouched one unmapped and not
// resident. What was mapped shows in the device's page faults: an RDMA
// WRITE into a page mapped for writing faults nothing, into one mapped for
// reading faults it (and maps it for writing), into an unmapped one
// faults it. A prefetch of a page mapped for writing remaps it for
// reading (the kernel's resync). Without FLUSH the prefetch is queued:
// AdviseMR returns, and the pages get mapped afterwards; a range error is
// not reported then, and is with FLUSH, after the ranges before it were
// prefetched.
func TestAdviseMR(t *testing.T) {
	ps := mmap.PageSize()
	p := newODPPair(t, model.Options{ODP: true})
	n, d := p.n, p.d
	mem := odpMem(t, 6).mem
	mr, err := n.pd.RegMR(mem, odpAccess)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	base := mr.Addr()
	page := func(i int) uint64 { return base + uint64(i*ps) }
	state := func(i int) model.ODPAccess { return d.ODPPage(mr.LKey(), page(i)) }
	for i := 0; i < 6; i++ {
		if s := state(i); s != model.ODPUnmapped {
			t.Fatalf("page %d of a new ODP MR over untouched memory: %v", i, s)
		}
	}
	calls := d.MethodCalls(abi.UVERBS_OBJECT_MR, abi.UVERBS_METHOD_ADVISE_MR)
	advise := func(a uverbs.MRAdvice, flags uint32, sgl ...uverbs.SGE) error {
		t.Helper()
		return n.pd.AdviseMR(a, flags, sgl)
	}
	sge := func(i, pages int) uverbs.SGE {
		return uverbs.SGE{Addr: page(i), Length: uint32(pages * ps), LKey: mr.LKey()}
	}

	if err := advise(uverbs.AdvicePrefetch, uverbs.AdviseFlush, sge(0, 1)); err != nil {
		t.Fatalf("AdviseMR(PREFETCH, FLUSH): %v", err)
	}
	if got := d.MethodCalls(abi.UVERBS_OBJECT_MR, abi.UVERBS_METHOD_ADVISE_MR); got != calls+1 {
		t.Errorf("ADVISE_MR calls on the MR object: %d, want %d", got, calls+1)
	}
	if s := state(0); s != model.ODPRead {
		t.Errorf("page 0 after PREFETCH: %v, want read", s)
	}
	if !resident(t, mem[0:]) || resident(t, mem[ps:]) {
		t.Errorf("PREFETCH did not fault page 0 in, or faulted page 1 (resident %v, %v)", resident(t, mem[0:]), resident(t, mem[ps:]))
	}
	if err := advise(uverbs.AdvicePrefetchWrite, uverbs.AdviseFlush, sge(1, 1)); err != nil {
		t.Fatalf("AdviseMR(PREFETCH_WRITE, FLUSH): %v", err)
	}
	if s := state(1); s != model.ODPWrite {
		t.Errorf("page 1 after PREFETCH_WRITE: %v, want write", s)
	}
	mem[2*ps] = 1 // the CPU writes page 2; page 3 stays untouched
	if err := advise(uverbs.AdvicePrefetchNoFault, uverbs.AdviseFlush, sge(2, 2)); err != nil {
		t.Fatalf("AdviseMR(PREFETCH_NO_FAULT, FLUSH): %v", err)
	}
	if s2, s3 := state(2), state(3); s2 != model.ODPWrite || s3 != model.ODPUnmapped {
		t.Errorf("after PREFETCH_NO_FAULT: page 2 (written by the CPU) %v, page 3 (untouched) %v; want write, unmapped", s2, s3)
	}
	if resident(t, mem[3*ps:]) {
		t.Errorf("PREFETCH_NO_FAULT faulted the untouched page in")
	}

	// The device's faults tell what was mapped.
	faults := func() int { return d.Stats().ODPFaults }
	f0 := faults()
	got := p.write(t, mr.RKey(), page(1)+8, 64, uverbs.WCSuccess)
	if !bytes.Equal(mem[ps+8:ps+72], got) {
		t.Errorf("the WRITE into page 1 did not land")
	}
	if f := faults() - f0; f != 0 {
		t.Errorf("a WRITE into a page PREFETCH_WRITE mapped: %d page faults, want 0", f)
	}
	p.write(t, mr.RKey(), page(2), 64, uverbs.WCSuccess)
	if f := faults() - f0; f != 0 {
		t.Errorf("a WRITE into the page PREFETCH_NO_FAULT mapped for writing: %d page faults, want 0", f)
	}
	p.write(t, mr.RKey(), page(0), 64, uverbs.WCSuccess)
	if f := faults() - f0; f != 1 || state(0) != model.ODPWrite {
		t.Errorf("a WRITE into the page PREFETCH mapped for reading: %d page faults (want 1), then %v (want write)", f, state(0))
	}
	p.write(t, mr.RKey(), page(3), 64, uverbs.WCSuccess)
	if f := faults() - f0; f != 2 {
		t.Errorf("a WRITE into the page PREFETCH_NO_FAULT left unmapped: %d page faults in all, want 2", f)
	}
	// PREFETCH of a page mapped for writing maps it for reading.
	if err := advise(uverbs.AdvicePrefetch, uverbs.AdviseFlush, sge(1, 1)); err != nil || state(1) != model.ODPRead {
		t.Errorf("PREFETCH of a page mapped for writing: %v, then %v; want read", err, state(1))
	}

	// Without FLUSH: queued, done by the device afterwards; a range
	// outside the MR is not reported.
	outside := uverbs.SGE{Addr: page(6), Length: 64, LKey: mr.LKey()}
	if err := advise(uverbs.AdvicePrefetchWrite, 0, sge(4, 1), outside); err != nil {
		t.Fatalf("AdviseMR(PREFETCH_WRITE) with a range outside the MR, no FLUSH: %v, want success", err)
	}
	for deadline := time.Now().Add(10 * time.Second); state(4) != model.ODPWrite; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the queued PREFETCH_WRITE never mapped page 4: %v", state(4))
		}
	}
	// With FLUSH the same list fails with EFAULT, after it prefetched
	// the range before the bad one.
	if err := advise(uverbs.AdvicePrefetchWrite, uverbs.AdviseFlush, sge(5, 1), outside); !errors.Is(err, unix.EFAULT) {
		t.Errorf("AdviseMR(PREFETCH_WRITE, FLUSH) with a range outside the MR: %v, want EFAULT", err)
	}
	if s := state(5); s != model.ODPWrite {
		t.Errorf("the range before the bad one: %v, want write (prefetched before the error)", s)
	}
}

// TestAdviseMRRefusals: every refusal of ADVISE_MR the kernel makes that
// the uverbs API lets through, with the kernel's errno (Linux 6.1
// get_prefetchable_mr, pagefault_mr, hmm_range_fault): a key of no ODP MR
// (the non-ODP MR's, a key naming nothing) ENOENT, a memory window's key
// EINVAL, an MR of another PD EPERM, PREFETCH_WRITE of an ODP MR without
// write access EPERM (these also without FLUSH: the keys are checked
// before the prefetch is queued); with FLUSH a range starting before the
// MR or reaching past its last page EFAULT (up to the end of the last page
// is inside), an unmapped page EFAULT for PREFETCH (NO_FAULT maps nothing
// there and succeeds), a write prefetch of a page the process cannot
// write EPERM (PREFETCH maps it for reading), a page it cannot read
// EFAULT.
func TestAdviseMRRefusals(t *testing.T) {
	ps := mmap.PageSize()
	d, dev := newModel(t, nil, model.Options{ODP: true})
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	om := odpMem(t, 5)
	mem := om.mem
	mr, err := n.pd.RegMR(mem, odpAccess)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	ro, err := n.pd.RegMR(mem[:ps], uverbs.AccessRemoteRead|uverbs.AccessOnDemand)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	pd2, err := n.ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd2.Close()
	other, err := pd2.RegMR(mem, odpAccess)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	mw, err := n.pd.AllocMW(uverbs.MWType1)
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close()
	short, err := n.pd.RegMR(mem[:100], odpAccess) // 100 bytes: its pages end at ps
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	base := mr.Addr()
	// Page 2 unmapped, page 3 read-only, page 4 no access.
	om.unmap(t, 2)
	if err := unix.Mprotect(mem[3*ps:4*ps], unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mprotect(mem[4*ps:5*ps], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	at := func(i int) uint64 { return base + uint64(i*ps) }
	for _, c := range []struct {
		name   string
		advice uverbs.MRAdvice
		flags  uint32
		sge    uverbs.SGE
		want   error // nil: success
	}{
		{"the key of a non-ODP MR", uverbs.AdvicePrefetch, uverbs.AdviseFlush, n.sge(0, 64), unix.ENOENT},
		{"the key of a non-ODP MR, no FLUSH", uverbs.AdvicePrefetch, 0, n.sge(0, 64), unix.ENOENT},
		{"a key naming nothing", uverbs.AdvicePrefetch, uverbs.AdviseFlush, uverbs.SGE{Addr: base, Length: 64, LKey: mr.LKey() ^ 0x100000}, unix.ENOENT},
		{"a memory window's key", uverbs.AdvicePrefetch, uverbs.AdviseFlush, uverbs.SGE{Addr: base, Length: 64, LKey: mw.RKey()}, unix.EINVAL},
		{"an MR of another PD", uverbs.AdvicePrefetch, 0, uverbs.SGE{Addr: base, Length: 64, LKey: other.LKey()}, unix.EPERM},
		{"PREFETCH_WRITE of a read-only MR", uverbs.AdvicePrefetchWrite, 0, uverbs.SGE{Addr: base, Length: 64, LKey: ro.LKey()}, unix.EPERM},
		{"PREFETCH of the read-only MR", uverbs.AdvicePrefetch, uverbs.AdviseFlush, uverbs.SGE{Addr: base, Length: 64, LKey: ro.LKey()}, nil},
		{"a range starting before the MR", uverbs.AdvicePrefetch, uverbs.AdviseFlush, uverbs.SGE{Addr: base - 8, Length: 64, LKey: mr.LKey()}, unix.EFAULT},
		{"a range past the MR's last page", uverbs.AdvicePrefetch, uverbs.AdviseFlush, uverbs.SGE{Addr: base + 64, Length: uint32(ps), LKey: short.LKey()}, unix.EFAULT},
		{"a range past the MR's length in its last page", uverbs.AdvicePrefetch, uverbs.AdviseFlush, uverbs.SGE{Addr: base + 64, Length: uint32(ps - 64), LKey: short.LKey()}, nil},
		{"PREFETCH of an unmapped page", uverbs.AdvicePrefetch, uverbs.AdviseFlush, uverbs.SGE{Addr: at(2), Length: 64, LKey: mr.LKey()}, unix.EFAULT},
		{"PREFETCH_WRITE of an unmapped page", uverbs.AdvicePrefetchWrite, uverbs.AdviseFlush, uverbs.SGE{Addr: at(1), Length: uint32(2 * ps), LKey: mr.LKey()}, unix.EFAULT},
		{"PREFETCH_NO_FAULT of an unmapped page", uverbs.AdvicePrefetchNoFault, uverbs.AdviseFlush, uverbs.SGE{Addr: at(2), Length: 64, LKey: mr.LKey()}, nil},
		{"PREFETCH of an unmapped page, no FLUSH", uverbs.AdvicePrefetch, 0, uverbs.SGE{Addr: at(2), Length: 64, LKey: mr.LKey()}, nil},
		{"PREFETCH_WRITE of a read-only page", uverbs.AdvicePrefetchWrite, uverbs.AdviseFlush, uverbs.SGE{Addr: at(3), Length: 64, LKey: mr.LKey()}, unix.EPERM},
		{"PREFETCH of a read-only page", uverbs.AdvicePrefetch, uverbs.AdviseFlush, uverbs.SGE{Addr: at(3), Length: 64, LKey: mr.LKey()}, nil},
		{"PREFETCH of a page without access", uverbs.AdvicePrefetch, uverbs.AdviseFlush, uverbs.SGE{Addr: at(4), Length: 64, LKey: mr.LKey()}, unix.EFAULT},
	} {
		err := n.pd.AdviseMR(c.advice, c.flags, []uverbs.SGE{c.sge})
		switch {
		case c.want == nil && err != nil:
			t.Errorf("%s: %v, want success", c.name, err)
		case c.want != nil && !errors.Is(err, c.want):
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if s := d.ODPPage(mr.LKey(), at(3)); s != model.ODPRead {
		t.Errorf("the read-only page after PREFETCH: %v, want read", s)
	}
	if s := d.ODPPage(mr.LKey(), at(1)); s != model.ODPUnmapped {
		t.Errorf("page 1 after a failed PREFETCH_WRITE of pages 1-2: %v, want unmapped (the fault failed as a whole)", s)
	}
}

// TestAdviseMRNoODP: a device without ODP refuses AdviseMR with
// ErrNotSupported by the capability check: no ADVISE_MR ioctl.
func TestAdviseMRNoODP(t *testing.T) {
	d, dev := newModel(t, nil, model.Options{})
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	err := n.pd.AdviseMR(uverbs.AdvicePrefetch, uverbs.AdviseFlush, []uverbs.SGE{n.sge(0, 64)})
	if !errors.Is(err, uverbs.ErrNotSupported) {
		t.Errorf("AdviseMR without ODP: %v, want ErrNotSupported", err)
	}
	if c := d.MethodCalls(abi.UVERBS_OBJECT_MR, abi.UVERBS_METHOD_ADVISE_MR); c != 0 {
		t.Errorf("%d ADVISE_MR ioctls reached the kernel, want none", c)
	}
}

// readSink keeps a test's read of a page from being optimized away.
var readSink byte

// TestODPRegSnapshot: REG_MR of an explicit ODP MR maps at once what the
// process has present (mlx5_ib_init_odp_mr: a snapshot, no fault): the
// page the CPU wrote is mapped for writing and takes an RDMA WRITE without
// a page fault, the page it only read (the shared zero page) is mapped for
// reading, the untouched one is not mapped and stays not present.
//
// Not every kernel puts the zero page under a read: a 6.18 host here gave
// the read a private page of its own (present, exclusively mapped, and
// writable, as do_anonymous_page makes it without the zero page), which
// the kernel's snapshot maps for writing; the test expects what the host
// did, read from pagemap's exclusive bit.
func TestODPRegSnapshot(t *testing.T) {
	ps := mmap.PageSize()
	p := newODPPair(t, model.Options{ODP: true})
	mem := odpMem(t, 4).mem
	mem[0] = 1
	readSink = mem[ps] // read only: the zero page, where the kernel uses it
	// Page 3 is present and read-only in the process on every kernel.
	mem[3*ps] = 1
	if err := unix.Mprotect(mem[3*ps:], unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	readPage := model.ODPRead
	const exclusive = 1 << 56 // pagemap's "page exclusively mapped"
	if pagemapEntry(t, mem[ps:])&exclusive != 0 {
		t.Log("this kernel gave the read a page of its own, not the zero page: it is mapped for writing")
		readPage = model.ODPWrite
	}
	mr, err := p.n.pd.RegMR(mem, odpAccess)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	base := mr.Addr()
	var got []model.ODPAccess
	for i := range 4 {
		got = append(got, p.d.ODPPage(mr.LKey(), base+uint64(i*ps)))
	}
	if want := []model.ODPAccess{model.ODPWrite, readPage, model.ODPUnmapped, model.ODPRead}; !slices.Equal(got, want) {
		t.Errorf("pages of a new ODP MR (written, read, untouched, read-only): %v, want %v", got, want)
	}
	if resident(t, mem[2*ps:]) {
		t.Errorf("the registration faulted the untouched page in")
	}
	f0 := p.d.Stats().ODPFaults
	p.write(t, mr.RKey(), base+8, 64, uverbs.WCSuccess)
	if f := p.d.Stats().ODPFaults - f0; f != 0 {
		t.Errorf("a WRITE into the page mapped at registration faulted %d pages, want 0", f)
	}
}

// TestODPMemoryWindow: a window bound over an ODP MR reaches its pages on
// demand as the MR does: an RDMA WRITE through the window's rkey into an
// untouched page lands (a page fault), one into a page the process has
// unmapped is a remote access error. ADVISE_MR with the window's key: the
// key it was allocated with is EINVAL (an mkey, not an MR's), the key a
// bind gave it ENOENT (the kernel knows the window by its first key).
func TestODPMemoryWindow(t *testing.T) {
	ps := mmap.PageSize()
	p := newODPPair(t, model.Options{ODP: true})
	om := odpMem(t, 2)
	mr, err := p.n.pd.RegMR(om.mem, odpAccess|uverbs.AccessMWBind)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	mw, err := p.n.pd.AllocMW(uverbs.MWType1)
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close()
	base := mr.Addr()
	sge := func(k uint32) []uverbs.SGE { return []uverbs.SGE{{Addr: base, Length: 64, LKey: k}} }
	if err := p.n.pd.AdviseMR(uverbs.AdvicePrefetch, uverbs.AdviseFlush, sge(mw.RKey())); !errors.Is(err, unix.EINVAL) {
		t.Errorf("AdviseMR with a window's key: %v, want EINVAL", err)
	}
	k := uverbs.IncRKey(mw.RKey())
	b := uverbs.MWBind{MWRKey: mw.RKey(), NewRKey: k, MRLKey: mr.LKey(), Addr: base, Length: uint64(2 * ps), Access: uint32(uverbs.AccessRemoteWrite)}
	if w := p.post(t, uverbs.SendWR{ID: 0xb1, Opcode: uverbs.WRBindMW, Bind: b}); w.Status != uverbs.WCSuccess {
		t.Fatalf("BIND_MW over the ODP MR: %+v", w)
	}
	f0 := p.d.Stats().ODPFaults
	src := p.write(t, k, base+32, 128, uverbs.WCSuccess)
	if !bytes.Equal(om.mem[32:160], src) {
		t.Errorf("the WRITE through the window did not land")
	}
	if f := p.d.Stats().ODPFaults - f0; f != 1 {
		t.Errorf("the WRITE through the window faulted %d pages, want 1", f)
	}
	if err := p.n.pd.AdviseMR(uverbs.AdvicePrefetch, uverbs.AdviseFlush, sge(k)); !errors.Is(err, unix.ENOENT) {
		t.Errorf("AdviseMR with the key a bind gave the window: %v, want ENOENT", err)
	}
	om.unmap(t, 1)
	p.write(t, k, base+uint64(ps), 64, uverbs.WCRemAccessErr)
}
