package uverbs

import (
	"fmt"

	"github.com/goverbs/goverbs/abi"
)

// MRAdvice is what AdviseMR tells the device about a range of an
// on-demand-paging MR (enum ib_uverbs_advise_mr_advice).
type MRAdvice uint32

// Advices.
const (
	AdvicePrefetch        MRAdvice = abi.IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH          // fault the pages in for reading
	AdvicePrefetchWrite   MRAdvice = abi.IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE    // fault them in for writing
	AdvicePrefetchNoFault MRAdvice = abi.IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT // map what is present, fault nothing
)

// AdviseFlush makes AdviseMR wait until the prefetch is done
// (IB_UVERBS_ADVISE_MR_FLAG_FLUSH); without it the kernel may prefetch
// asynchronously.
const AdviseFlush = abi.IB_UVERBS_ADVISE_MR_FLAG_FLUSH

// odpSupported is the capability check of on-demand paging: a device whose
// ODP capabilities lack need (ODPSupport: rxe of Linux 6.12 and before,
// siw, the mlx5 model without ODP; ODPSupportImplicit for the implicit MR)
// refuses with ErrNotSupported before any command but the context's first
// QUERY_DEVICE (capabilities).
func (c *Context) odpSupported(verb string, need ODPGeneralCap) error {
	if c.skipCapChecks {
		return nil
	}
	a, err := c.capabilities()
	if err != nil {
		return err
	}
	if a.ODPCaps.General&need != need {
		what := "on-demand paging"
		if need&ODPSupportImplicit != 0 {
			what = "implicit on-demand paging"
		}
		return opError(verb, c.dev.Name, abi.TransportNone,
			fmt.Errorf("%w: the device has no %s (ODP capabilities %v)", ErrNotSupported, what, a.ODPCaps.General))
	}
	return nil
}

// AdviseMR gives the device advice about ranges of on-demand-paging MRs
// of the PD (ibv_advise_mr: UVERBS_METHOD_ADVISE_MR of the MR object, an
// ioctl; the kernel has no write() form): each SGE names lkey, address and
// length of one range. flags is 0 or AdviseFlush. A device without
// on-demand paging is refused with ErrNotSupported before any command; a
// kernel whose driver has no advise_mr answers EOPNOTSUPP (the method
// exists for every device: Linux 6.1's handler checks the driver), which
// is ErrNotSupported too (one ioctl; again while the kernel answers
// EINTR, as RegMR).
//
// Without AdviseFlush the kernel checks the keys and queues the prefetch:
// a range it then cannot fault in is not reported. With it the prefetch is
// done when AdviseMR returns and its errors are returned (mlx5: EFAULT for
// a range outside the MR or not mapped, EPERM for a write prefetch of
// memory the process cannot write).
func (pd *PD) AdviseMR(advice MRAdvice, flags uint32, sgl []SGE) (err error) {
	const verb = "AdviseMR"
	if sp := pd.ctx.begin(verb); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	dev := pd.ctx.dev.Name
	switch {
	case advice > AdvicePrefetchNoFault:
		return argError(verb, dev, "advice %d", advice)
	case flags&^AdviseFlush != 0:
		return argError(verb, dev, "flags %#x: only AdviseFlush is defined", flags)
	case len(sgl) == 0:
		return argError(verb, dev, "no range to advise about")
	}
	if err := pd.use(verb, dev); err != nil {
		return err
	}
	defer pd.done()
	if err := pd.ctx.odpSupported(verb, ODPSupport); err != nil {
		return err
	}
	list := make([]byte, 0, len(sgl)*16) // struct ib_uverbs_sge each
	for _, s := range sgl {
		e := abi.IbUverbsSge{Addr: s.Addr, Length: s.Length, Lkey: s.LKey}
		list = append(list, abi.Bytes(&e)...)
	}
	// A prefetch may make an implicit MR's first child, the process's
	// first ODP mapping, which a pending signal interrupts (odpTries);
	// each try takes a new builder (one is sent once).
	return retryEINTR(func() error { return pd.adviseMR(verb, advice, flags, list) })
}

// adviseMR sends one ADVISE_MR.
func (pd *PD) adviseMR(verb string, advice MRAdvice, flags uint32, list []byte) error {
	// The method belongs to the MR object (enum uverbs_methods_mr; the PD
	// object has only PD_DESTROY, so asking it answers EPROTONOSUPPORT).
	b := abi.NewIoctl(abi.UVERBS_OBJECT_MR, abi.UVERBS_METHOD_ADVISE_MR)
	defer b.Release()
	b.Handle(abi.UVERBS_ATTR_ADVISE_MR_PD_HANDLE, pd.handle)
	b.Uint64In(abi.UVERBS_ATTR_ADVISE_MR_ADVICE, uint64(advice)) // UVERBS_ATTR_CONST_IN: a u64
	b.Uint32In(abi.UVERBS_ATTR_ADVISE_MR_FLAGS, flags)
	b.PtrIn(abi.UVERBS_ATTR_ADVISE_MR_SGE_LIST, list)
	// A kernel without the method (before Linux 5.0, or without ioctl)
	// answers that there is no such method, and there is no write() form
	// to fall back to. A kernel with it answers EOPNOTSUPP for a driver
	// without advise_mr (uverbs_std_types_mr.c: the method is declared for
	// every device, and its handler checks ops.advise_mr).
	_, err := pd.ctx.ioctlOr(verb, b, abi.TransportNone, func() error {
		return fmt.Errorf("%w: the kernel has no ADVISE_MR method", ErrNotSupported)
	})
	return err
}
