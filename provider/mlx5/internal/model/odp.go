package model

import (
	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/internal/kernel"
	"github.com/goverbs/goverbs/mmap"
	"golang.org/x/sys/unix"
)

// On-demand paging (Options.ODP), as the kernel and mlx5_ib have it for an
// explicit ODP MR (Linux 6.1: ib_reg_user_mr, create_user_odp_mr):
//   - REG_MR with IB_ACCESS_ON_DEMAND on a device without ODP is EINVAL
//     (the core's check of IBK_ON_DEMAND_PAGING); with ODP it pins
//     nothing;
//   - an implicit ODP MR (start 0, length U64_MAX) is not modelled:
//     EOPNOTSUPP (the device reports no IB_ODP_SUPPORT_IMPLICIT);
//   - the device faults pages in when an access reaches them; a fault the
//     kernel cannot resolve (no mapping there: hmm_range_fault fails)
//     fails the access, which the model reports as a protection error of
//     the faulting side (local protection on the requester's SGE, remote
//     access on the responder). Which syndrome ConnectX gives after a
//     failed fault resume is not public: only "the access fails, nothing
//     is written" is checked.

// ODP capabilities (enum ib_odp_general_cap_bits and
// ib_odp_transport_cap_bits, include/rdma/ib_verbs.h).
const (
	odpSupport         = 1 << 0
	odpSupportSend     = 1 << 0
	odpSupportRecv     = 1 << 1
	odpSupportWrite    = 1 << 2
	odpSupportRead     = 1 << 3
	odpSupportAtomic   = 1 << 4
	odpSupportSRQRecv  = 1 << 5
	odpRCTransportCaps = odpSupportSend | odpSupportRecv | odpSupportWrite | odpSupportRead | odpSupportAtomic | odpSupportSRQRecv
)

func (d *Device) odpCaps() abi.IbUverbsOdpCaps {
	if !d.o.ODP {
		return abi.IbUverbsOdpCaps{}
	}
	return abi.IbUverbsOdpCaps{GeneralCaps: odpSupport,
		PerTransportCaps: abi.IbUverbsOdpCapsPerTransportCaps{RcOdpCaps: odpRCTransportCaps, UdOdpCaps: odpSupportSend | odpSupportSRQRecv}}
}

// checkODPReg is REG_MR's ODP rule.
func (d *Device) checkODPReg(odp bool, start, length uint64) error {
	switch {
	case !odp:
		return nil
	case !d.o.ODP:
		return unix.EINVAL
	case start == 0 && length == ^uint64(0):
		return unix.EOPNOTSUPP // implicit ODP: not modelled
	}
	return nil
}

// fault resolves the pages of [addr, addr+n) as the kernel's page fault
// handler does: it succeeds if every page is mapped in the process (the
// kernel would fault it in), and fails where one is not.
func fault(addr uint64, n uint32) bool {
	ps := uint64(mmap.PageSize())
	lo, hi := addr&^(ps-1), (addr+uint64(n)+ps-1)&^(ps-1)
	// msync(MS_ASYNC) touches no page and fails with ENOMEM where the
	// range is not mapped.
	return unix.Msync(kernel.UserMemory(lo, int(hi-lo)), unix.MS_ASYNC) == nil
}
