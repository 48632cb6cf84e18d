package uverbs

import (
	"math"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// RegImplicitODP registers the implicit on-demand-paging MR of the PD
// (rdma-core: ibv_reg_mr(pd, NULL, SIZE_MAX, access|IBV_ACCESS_ON_DEMAND);
// REG_MR of start 0 and length U64_MAX at I/O address 0, one syscall): one
// lkey and rkey through which the device reaches any address the process
// maps, now or later, at its own address (an SGE's or a peer's address is
// the process's address), faulting pages in as it touches them. Nothing is
// pinned. AccessOnDemand is implied; AccessZeroBased is refused (the I/O
// addresses are the process's).
//
// The MR's Addr and IOVA are 0 and its Len is math.MaxInt; SGE(off, n) and
// RemoteAddr(off) take the process's address as off. Memory the process
// cannot write is not reachable through a writable implicit MR (the kernel
// faults pages in for writing), and an access to an address nothing is
// mapped at fails (a local protection or remote access error).
//
// A device whose ODP capabilities lack ODPSupportImplicit (rxe, siw, mlx5
// without the firmware capabilities) is refused with ErrNotSupported by the
// capability check (the context's first QUERY_DEVICE, or none: see
// Context.QueryDevice), before any REG_MR.
func (pd *PD) RegImplicitODP(access Access) (_ *MR, err error) {
	const verb = "RegImplicitODP"
	if sp := pd.ctx.begin(verb); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	dev := pd.ctx.dev.Name
	access |= AccessOnDemand
	switch {
	case !access.validate():
		return nil, argError(verb, dev, "access %v: remote write and remote atomic need local write", access)
	case access&AccessZeroBased != 0:
		return nil, argError(verb, dev, "access %v: the implicit ODP MR's I/O addresses are the process's own", access)
	}
	if err := pd.use(verb, dev); err != nil {
		return nil, err
	}
	defer pd.done()
	if err := pd.ctx.odpSupported(verb, ODPSupportImplicit); err != nil {
		return nil, err
	}
	req := abi.IbUverbsRegMr{Start: 0, Length: math.MaxUint64, HcaVa: 0, PdHandle: pd.handle, AccessFlags: uint32(access)}
	var resp abi.IbUverbsRegMrResp
	in, out := pd.ctx.prov.Udata(provider.VerbRegMR)
	cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_REG_MR, In: abi.Bytes(&req), Out: abi.Bytes(&resp), DriverIn: in, DriverOut: out}
	if err := pd.ctx.invoke(verb, &cmd); err != nil {
		return nil, err
	}
	return &MR{pd: pd, c: pd.ctx, handle: resp.MrHandle, lkey: resp.Lkey, rkey: resp.Rkey, length: math.MaxInt, access: access}, nil
}
