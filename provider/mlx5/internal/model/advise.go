package model

import (
	"math"

	"github.com/goverbs/goverbs/abi"
	"golang.org/x/sys/unix"
)

// UVERBS_METHOD_ADVISE_MR of the MR object, as Linux 6.1 answers it:
//
//   - the ioctl framework (uverbs_ioctl.c: ib_uverbs_run_method,
//     uverbs_set_attr, uverbs_process_attr) takes the attributes in the
//     order given: one it does not know is ignored unless flagged
//     mandatory (EPROTONOSUPPORT); the PD handle (an IDR attribute: no
//     length, reserved bits zero, else EINVAL) must name an object
//     (ENOENT) that is a PD (EINVAL); the advice (CONST_IN) is exactly 8
//     bytes, the flags 4 or 8, the SGE list at least 16 (else EINVAL); a
//     mandatory attribute missing is EINVAL;
//   - the handler (uverbs_std_types_mr.c): a driver without advise_mr
//     answers EOPNOTSUPP (the method is declared for every device: the
//     model without ODP, as mlx5_ib without IB_ODP_SUPPORT, has none); an
//     advice beyond the enum's unsigned int is EINVAL, a flag other than
//     FLUSH EINVAL, an SGE list not a whole number of struct ib_sge
//     EINVAL;
//   - mlx5_ib_advise_mr: an advice other than the three prefetches is
//     EOPNOTSUPP; mlx5_ib_advise_mr_prefetch then takes each SGE's key
//     (get_prefetchable_mr): a key of no ODP MR (a non-ODP MR's, a stale
//     one, nothing's) is ENOENT, a memory window's EINVAL, an MR of
//     another PD EPERM, and PREFETCH_WRITE of an MR that is not writable
//     EPERM. With FLUSH each range is prefetched in turn before the next
//     key is taken, and the first error is returned (pagefault_mr: EFAULT
//     for a range outside the MR, the fault's EFAULT or EPERM); the ranges
//     before it stay prefetched. Without FLUSH every key is checked first,
//     then the prefetch is queued (a workqueue) and its errors are
//     dropped: the model queues it for the device goroutine.
//
// PREFETCH faults the pages in and maps them for reading only (DOWNGRADE);
// PREFETCH_WRITE maps them for writing when the MR is writable;
// PREFETCH_NO_FAULT maps what the process has present and faults nothing
// (SNAPSHOT). A prefetch sets the pages' mapping to what it grants, as the
// kernel's resync of a page already mapped does.

// attrKind is how the ioctl framework takes an attribute.
type attrKind uint8

const (
	attrIDR    attrKind = iota // an object handle
	attrPtrIn                  // bytes, inline up to 8
	attrPtrOut                 // bytes the kernel writes: checked as PTR_IN is
)

// attrSpec is one attribute of a method (UVERBS_ATTR_IDR, _PTR_IN,
// _CONST_IN, _FLAGS_IN).
type attrSpec struct {
	id        uint16
	kind      attrKind
	min, max  uint16         // PTR_IN length bounds
	isType    func(any) bool // IDR: the object type it must name
	mandatory bool
}

// checkAttrs runs the ioctl framework's checks of c's attributes against
// the method's specs, in the order the caller gave them.
func (u *ufile) checkAttrs(c *call, specs []attrSpec) error {
	present := map[uint16]bool{}
	for _, a := range c.attrs {
		var s *attrSpec
		for i := range specs {
			if specs[i].id == a.id {
				s = &specs[i]
			}
		}
		if s == nil {
			if a.flags&abi.UVERBS_ATTR_F_MANDATORY != 0 {
				return unix.EPROTONOSUPPORT
			}
			continue
		}
		reserved := ne.Uint16(c.arg[a.off+6:])
		switch s.kind {
		case attrIDR:
			if reserved != 0 || a.len != 0 {
				return unix.EINVAL
			}
			// lookup_get_idr_uobject and rdma_lookup_get_uobject: a
			// negative id is EINVAL, one naming nothing ENOENT, an
			// object of another type EINVAL.
			if int64(a.data) < 0 {
				return unix.EINVAL
			}
			o, ok := u.ctx.objs[uint32(a.data)]
			if !ok || a.data > math.MaxUint32 {
				return unix.ENOENT
			}
			if !s.isType(o) {
				return unix.EINVAL
			}
		case attrPtrIn, attrPtrOut:
			if a.len < s.min || a.len > s.max || reserved != 0 {
				return unix.EINVAL
			}
		}
		present[a.id] = true
	}
	for _, s := range specs {
		if s.mandatory && !present[s.id] {
			return unix.EINVAL
		}
	}
	return nil
}

var adviseMRAttrs = []attrSpec{
	{id: abi.UVERBS_ATTR_ADVISE_MR_PD_HANDLE, kind: attrIDR, isType: func(o any) bool { _, ok := o.(*mpd); return ok }, mandatory: true},
	{id: abi.UVERBS_ATTR_ADVISE_MR_ADVICE, kind: attrPtrIn, min: 8, max: 8, mandatory: true},
	{id: abi.UVERBS_ATTR_ADVISE_MR_FLAGS, kind: attrPtrIn, min: 4, max: 8, mandatory: true},
	{id: abi.UVERBS_ATTR_ADVISE_MR_SGE_LIST, kind: attrPtrIn, min: 16, max: math.MaxUint16, mandatory: true},
}

// prefetch is one range of an ADVISE_MR prefetch.
type prefetch struct {
	m      *mmr
	addr   uint64 // I/O address
	length uint32
	advice uint64
}

// ioctlAdviseMR is UVERBS_METHOD_ADVISE_MR.
func (u *ufile) ioctlAdviseMR(c *call) error {
	d := u.d
	if err := u.checkAttrs(c, adviseMRAttrs); err != nil {
		return err
	}
	pd := u.ctx.objs[handleOf(c, abi.UVERBS_ATTR_ADVISE_MR_PD_HANDLE)].(*mpd)
	if !d.o.ODP {
		return unix.EOPNOTSUPP // no ops.advise_mr
	}
	advice, _ := c.u64(abi.UVERBS_ATTR_ADVISE_MR_ADVICE)
	if advice > math.MaxUint32 {
		return unix.EINVAL // beyond enum ib_uverbs_advise_mr_advice's type
	}
	flags, _ := c.u64(abi.UVERBS_ATTR_ADVISE_MR_FLAGS)
	if flags&^abi.IB_UVERBS_ADVISE_MR_FLAG_FLUSH != 0 {
		return unix.EINVAL
	}
	list, _ := c.in(abi.UVERBS_ATTR_ADVISE_MR_SGE_LIST)
	if len(list)%16 != 0 {
		return unix.EINVAL
	}
	switch advice {
	case abi.IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH, abi.IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE,
		abi.IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT:
	default:
		return unix.EOPNOTSUPP
	}
	var work []prefetch
	for off := 0; off < len(list); off += 16 {
		var s abi.IbUverbsSge
		copy(abi.Bytes(&s), list[off:off+16])
		m, err := d.prefetchable(pd, advice, s.Lkey)
		if err != nil {
			return err
		}
		p := prefetch{m: m, addr: s.Addr, length: s.Length, advice: advice}
		if flags&abi.IB_UVERBS_ADVISE_MR_FLAG_FLUSH != 0 {
			if err := d.prefetch(p); err != nil {
				return err
			}
			continue
		}
		work = append(work, p)
	}
	d.prefetches = append(d.prefetches, work...)
	return nil
}

// prefetchable is get_prefetchable_mr: the ODP MR lkey names, in pd, that
// the advice may prefetch.
func (d *Device) prefetchable(pd *mpd, advice uint64, lkey uint32) (*mmr, error) {
	m := d.mrs[lkey]
	if m == nil || !m.odp {
		if w := d.mws[lkey>>8]; w != nil && lkey&0xff == mwKeyByte {
			return nil, unix.EINVAL // an mkey, but not an MR's
		}
		return nil, unix.ENOENT
	}
	if m.pd != pd {
		return nil, unix.EPERM
	}
	if advice == abi.IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE && m.odpGrant() != ODPWrite {
		return nil, unix.EPERM
	}
	return m, nil
}

// prefetch carries out one range (pagefault_mr with the advice's flags).
func (d *Device) prefetch(p prefetch) error {
	m := p.m
	var va uint64
	if m.implicit {
		va = p.addr
		if va >= implicitLimit || implicitLimit-va < uint64(p.length) {
			return unix.EFAULT
		}
	} else {
		// The range must lie in the MR's pages: from its first byte to
		// the end of its last page (ib_umem_end).
		if p.addr < m.iova {
			return unix.EFAULT
		}
		va = m.start + (p.addr - m.iova)
		_, end, ok := pages(m.start, m.length)
		if va < m.start || !ok || va >= end || end-va < uint64(p.length) {
			return unix.EFAULT
		}
	}
	lo, hi, ok := pages(va, uint64(p.length))
	if !ok {
		return unix.EFAULT
	}
	switch p.advice {
	case abi.IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT:
		m.snapshot(lo, hi)
	case abi.IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH:
		if err := populate(lo, hi, false); err != nil {
			return err
		}
		m.mapPages(lo, hi, ODPRead) // DOWNGRADE: read access only
	default:
		grant := m.odpGrant()
		if err := populate(lo, hi, grant == ODPWrite); err != nil {
			return err
		}
		m.mapPages(lo, hi, grant)
	}
	d.stats.ODPPrefetches++
	return nil
}

// runPrefetches carries out the queued prefetches (the kernel's work item:
// errors are dropped; an MR deregistered meanwhile is skipped, as the
// kernel's dereg waits for the work to let go of it). Called with f.mu held.
func (d *Device) runPrefetches() bool {
	if len(d.prefetches) == 0 {
		return false
	}
	for _, p := range d.prefetches {
		if d.mrs[p.m.key] == p.m {
			d.prefetch(p)
		}
	}
	d.prefetches = nil
	return true
}
