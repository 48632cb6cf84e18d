package model

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"
	"sync"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/internal/kernel"
	"github.com/goverbs/goverbs/mmap"
	"golang.org/x/sys/unix"
)

// On-demand paging (Options.ODP, Options.ImplicitODP), as the kernel and
// mlx5_ib have it (Linux 6.1: ib_reg_user_mr, create_user_odp_mr,
// mlx5_ib_alloc_implicit_mr, pagefault_mr, mlx5_ib_advise_mr):
//   - REG_MR with IB_ACCESS_ON_DEMAND on a device without ODP is EINVAL
//     (the core's check of IBK_ON_DEMAND_PAGING); with ODP it pins
//     nothing, and it maps the pages of the range the process has present
//     (mlx5_ib_init_odp_mr: a snapshot, no fault);
//   - the implicit ODP MR (start 0, length U64_MAX) covers the process's
//     whole address space with one key: its I/O address is 0 (any other
//     is EINVAL), and a device without IB_ODP_SUPPORT_IMPLICIT refuses it
//     with EINVAL (create_user_odp_mr);
//   - each ODP MR keeps which pages the device has mapped, for reading or
//     for writing (the umem's dma_list). An access that reaches a page not
//     mapped as it needs is a page fault: the driver faults the pages in
//     as the CPU would (hmm_range_fault) and maps them, for writing when
//     the MR is writable (pagefault_mr without DOWNGRADE), or the access
//     fails where the fault cannot be resolved (no mapping: EFAULT; a
//     write fault of a mapping the process cannot write: EPERM), which the
//     model reports as a protection error of the faulting side (local
//     protection on the requester's SGE, remote access on the responder).
//     Which syndrome ConnectX gives after a failed fault resume is not
//     public: only "the access fails, nothing is written" is checked. The
//     model does not see the process unmap or protect a page (the kernel's
//     MMU notifier would invalidate it); it checks the pages of every
//     access and forgets a mapping that is gone;
//   - ADVISE_MR (advise.go) prefetches: it maps pages the same way, or,
//     for PREFETCH_NO_FAULT, the pages the process has present.

// ODP capabilities (enum ib_odp_general_cap_bits and
// ib_odp_transport_cap_bits, include/rdma/ib_verbs.h).
const (
	odpSupport         = 1 << 0
	odpSupportImplicit = 1 << 1
	odpSupportSend     = 1 << 0
	odpSupportRecv     = 1 << 1
	odpSupportWrite    = 1 << 2
	odpSupportRead     = 1 << 3
	odpSupportAtomic   = 1 << 4
	odpSupportSRQRecv  = 1 << 5
	odpRCTransportCaps = odpSupportSend | odpSupportRecv | odpSupportWrite | odpSupportRead | odpSupportAtomic | odpSupportSRQRecv
)

// implicitLimit is where the implicit ODP MR ends: mlx5_imr_ksm_entries
// children of 1 GiB each, enough for TASK_SIZE (47 bits of address on
// x86-64, 48 on arm64 with 4 KiB pages); a fault beyond it is EFAULT
// (pagefault_implicit_mr).
var implicitLimit = func() uint64 {
	if runtime.GOARCH == "arm64" {
		return 1 << 48
	}
	return 1 << 47
}()

// ODPAccess is how an ODP MR maps one page for the device.
type ODPAccess uint8

// How a page is mapped.
const (
	ODPUnmapped ODPAccess = iota // not mapped: an access faults
	ODPRead                      // mapped for reading: a write faults
	ODPWrite                     // mapped for reading and writing
)

// String names the access for test failures and traces.
func (a ODPAccess) String() string {
	switch a {
	case ODPUnmapped:
		return "unmapped"
	case ODPRead:
		return "read"
	case ODPWrite:
		return "write"
	}
	return "ODPAccess(" + strconv.Itoa(int(a)) + ")"
}

func (d *Device) odpCaps() abi.IbUverbsOdpCaps {
	if !d.o.ODP {
		return abi.IbUverbsOdpCaps{}
	}
	general := uint64(odpSupport)
	if d.o.ImplicitODP {
		general |= odpSupportImplicit
	}
	return abi.IbUverbsOdpCaps{GeneralCaps: general,
		PerTransportCaps: abi.IbUverbsOdpCapsPerTransportCaps{RcOdpCaps: odpRCTransportCaps, UdOdpCaps: odpSupportSend | odpSupportSRQRecv}}
}

// isImplicit reports whether a REG_MR range asks for the implicit ODP MR.
func isImplicit(start, length uint64) bool { return start == 0 && length == ^uint64(0) }

// checkODPReg is REG_MR's ODP rule.
func (d *Device) checkODPReg(odp bool, start, length, iova uint64) error {
	switch {
	case !odp:
		return nil
	case !d.o.ODP:
		return unix.EINVAL // ib_check_mr_access: no IBK_ON_DEMAND_PAGING
	case isImplicit(start, length) && iova != 0:
		return unix.EINVAL
	case isImplicit(start, length) && !d.o.ImplicitODP:
		return unix.EINVAL // no IB_ODP_SUPPORT_IMPLICIT
	}
	return nil
}

// writableAccess is ib_access_writable: the access rights that make an
// MR's memory writable by the device.
const writableAccess = accLocalWrite | accRemoteWrite | accRemoteAtomic | abi.IB_UVERBS_ACCESS_MW_BIND

// odpGrant is how a fault maps pages of m: for writing when the MR is
// writable.
func (m *mmr) odpGrant() ODPAccess {
	if m.access&writableAccess != 0 {
		return ODPWrite
	}
	return ODPRead
}

func pageSize() uint64 { return uint64(mmap.PageSize()) }

// pages returns the page-aligned span [lo, hi) holding [va, va+n), false
// if it wraps.
func pages(va, n uint64) (lo, hi uint64, ok bool) {
	ps := pageSize()
	end := va + n
	if end < va || end > ^uint64(0)-ps {
		return 0, 0, false
	}
	return va &^ (ps - 1), (end + ps - 1) &^ (ps - 1), true
}

// odpAccess is the device reaching n bytes at user address va of the ODP
// MR m, writing them if write: pages not mapped as the access needs fault
// (counted in Stats.ODPFaults) and are mapped as odpGrant says; false if a
// fault cannot be resolved.
func (d *Device) odpAccess(m *mmr, va uint64, n uint32, write bool) bool {
	if m.implicit && (va >= implicitLimit || implicitLimit-va < uint64(n)) {
		return false
	}
	lo, hi, ok := pages(va, uint64(n))
	if !ok {
		return false
	}
	need := ODPRead
	if write {
		need = ODPWrite
	}
	ps := pageSize()
	missing := 0
	for p := lo; p < hi; p += ps {
		if m.odpPages[p] < need {
			missing++
		}
	}
	// A fault maps the pages as odpGrant says; pages mapped as needed are
	// used as they are, and the model still checks the process has them
	// (a munmap or mprotect since would have invalidated them).
	grant := need
	if missing > 0 {
		grant = m.odpGrant()
	}
	if populate(lo, hi, grant == ODPWrite) != nil {
		for p := lo; p < hi; p += ps {
			delete(m.odpPages, p)
		}
		return false
	}
	if missing > 0 {
		d.stats.ODPFaults += missing
		m.mapPages(lo, hi, grant)
	}
	return true
}

// mapPages records the pages of [lo, hi) as mapped with access a.
func (m *mmr) mapPages(lo, hi uint64, a ODPAccess) {
	if m.odpPages == nil {
		m.odpPages = map[uint64]ODPAccess{}
	}
	for p := lo; p < hi; p += pageSize() {
		m.odpPages[p] = a
	}
}

// snapshot maps the pages of [lo, hi) the process has present, without
// faulting any (hmm_range_fault without REQ_FAULT: the snapshot of REG_MR
// and of PREFETCH_NO_FAULT): a present page of a readable mapping is
// mapped for reading, and for writing too where the MR is writable and the
// page is writable in the process. Whether a present page table entry is
// writable cannot be read from user space; the model takes an anonymous
// page mapped only here (pagemap's "exclusively mapped", which a page the
// process wrote has and the shared zero page a read put there has not) in
// a writable mapping as writable. A page not present is unmapped (the
// kernel's notifier would have invalidated it).
func (m *mmr) snapshot(lo, hi uint64) {
	ps := pageSize()
	n := int((hi - lo) / ps)
	ents := make([]byte, 8*n)
	f, err := os.Open("/proc/self/pagemap")
	if err == nil {
		_, err = f.ReadAt(ents, int64(lo/ps*8))
		f.Close()
	}
	if err != nil {
		clear(ents) // nothing known present: nothing mapped
	}
	vs := vmas()
	for i := 0; i < n; i++ {
		p := lo + uint64(i)*ps
		e := ne.Uint64(ents[8*i:])
		v := findVMA(vs, p)
		const present, file, exclusive = 1 << 63, 1 << 61, 1 << 56
		if e&present == 0 || v == nil || !v.r {
			delete(m.odpPages, p)
			continue
		}
		a := ODPRead
		if m.odpGrant() == ODPWrite && v.w && e&file == 0 && e&exclusive != 0 {
			a = ODPWrite
		}
		m.mapPages(p, p+ps, a)
	}
}

// populate faults the pages [lo, hi) in as the kernel's fault handler does
// for the device (hmm_range_fault with REQ_FAULT, and REQ_WRITE for a
// write): MADV_POPULATE_READ or MADV_POPULATE_WRITE, which fault the pages
// in without changing a byte. It fails as hmm_range_fault does: EFAULT
// where nothing is mapped or the mapping cannot be read, EPERM for a write
// fault of a mapping the process cannot write.
func populate(lo, hi uint64, write bool) error {
	adv := unix.MADV_POPULATE_READ
	if write {
		adv = unix.MADV_POPULATE_WRITE
	}
	_, _, e := unix.Syscall(unix.SYS_MADVISE, uintptr(lo), uintptr(hi-lo), uintptr(adv))
	if e == 0 {
		return nil
	}
	err := vmaCheck(lo, hi, write)
	if err == nil && (e != unix.EINVAL || populateWorks()) {
		err = unix.EFAULT // mapped as needed, and still not faulted in (SIGBUS)
	}
	return err
}

// populateWorks reports whether the running kernel has MADV_POPULATE_READ
// (Linux 5.14); without it populate relies on the mappings alone.
var populateWorks = sync.OnceValue(func() bool {
	ps := int(pageSize())
	b, err := unix.Mmap(-1, 0, ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return false
	}
	defer unix.Munmap(b)
	return unix.Madvise(b, unix.MADV_POPULATE_READ) == nil
})

// vma is one mapping of the process (a line of /proc/self/maps).
type vma struct {
	lo, hi uint64
	r, w   bool
}

// vmas lists the process's mappings in address order.
func vmas() []vma {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil
	}
	var out []vma
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 2 {
			continue
		}
		r, perms, ok := bytes.Cut(f[0], []byte("-"))
		if !ok || len(f[1]) < 2 {
			continue
		}
		lo, err1 := strconv.ParseUint(string(r), 16, 64)
		hi, err2 := strconv.ParseUint(string(perms), 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, vma{lo: lo, hi: hi, r: f[1][0] == 'r', w: f[1][1] == 'w'})
	}
	return out
}

func findVMA(vs []vma, addr uint64) *vma {
	for i := range vs {
		if vs[i].lo <= addr && addr < vs[i].hi {
			return &vs[i]
		}
	}
	return nil
}

// vmaCheck walks the mappings over [lo, hi) as hmm_range_fault does and
// returns its error: EFAULT at a hole or a mapping without read access,
// EPERM where a write fault meets a mapping without write access.
func vmaCheck(lo, hi uint64, write bool) error {
	at := lo
	for _, v := range vmas() {
		if v.hi <= at {
			continue
		}
		if v.lo > at || !v.r {
			return unix.EFAULT
		}
		if write && !v.w {
			return unix.EPERM
		}
		if at = v.hi; at >= hi {
			return nil
		}
	}
	return unix.EFAULT
}

// mapped reports whether the process still has the page at p (msync
// touches no page and fails with ENOMEM where nothing is mapped).
func mapped(p uint64) bool {
	return p != 0 && unix.Msync(kernel.UserMemory(p, int(pageSize())), unix.MS_ASYNC) == nil
}

// ODPPage tells how the ODP MR with key maps the page holding its I/O
// address addr (for the implicit ODP MR, the process's address), as the
// device sees it now: pages the process has unmapped since are unmapped.
// A key that names no ODP MR, or an address outside it, is ODPUnmapped.
func (d *Device) ODPPage(key uint32, addr uint64) ODPAccess {
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	m := d.mrs[key]
	if m == nil || !m.odp || addr < m.iova || addr-m.iova >= m.length {
		return ODPUnmapped
	}
	p := (m.start + (addr - m.iova)) &^ (pageSize() - 1)
	a := m.odpPages[p]
	if a != ODPUnmapped && !mapped(p) {
		delete(m.odpPages, p)
		return ODPUnmapped
	}
	return a
}
