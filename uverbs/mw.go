package uverbs

import (
	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// MWType is a memory window's type.
type MWType uint8

// Memory window types (IB_MW_TYPE_1, IB_MW_TYPE_2).
const (
	MWType1 MWType = 1
	MWType2 MWType = 2
)

// MW is a memory window. It is safe for concurrent use; Close is
// idempotent and returns nil after the Context closed.
type MW struct {
	pd     *PD
	handle uint32
	rkey   uint32
	typ    MWType
	lifetime
}

// AllocMW allocates a memory window (ALLOC_MW: one syscall).
func (pd *PD) AllocMW(t MWType) (_ *MW, err error) {
	if sp := pd.ctx.begin("AllocMW"); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	if t != MWType1 && t != MWType2 {
		return nil, argError("AllocMW", pd.ctx.dev.Name, "window type %d", t)
	}
	if err := pd.use("AllocMW", pd.ctx.dev.Name); err != nil {
		return nil, err
	}
	defer pd.done()
	req := abi.IbUverbsAllocMw{PdHandle: pd.handle, MwType: uint8(t)}
	var resp abi.IbUverbsAllocMwResp
	in, out := pd.ctx.prov.Udata(provider.VerbAllocMW)
	cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_ALLOC_MW, In: abi.Bytes(&req), Out: abi.Bytes(&resp), DriverIn: in, DriverOut: out}
	if err := pd.ctx.invoke("AllocMW", &cmd); err != nil {
		return nil, err
	}
	if tr, ok := pd.ctx.prov.(provider.MWTracker); ok {
		tr.MWAllocated(resp.Rkey, t == MWType2)
	}
	return &MW{pd: pd, handle: resp.MwHandle, rkey: resp.Rkey, typ: t}, nil
}

// RKey is the key the window was allocated with. A bind (a WRBindMW send
// request) gives the window MWBind.NewRKey, which peers must use from then
// on; the MW does not learn of it, so keep it with the bind.
func (mw *MW) RKey() uint32 { return mw.rkey }

// Type is the window's type.
func (mw *MW) Type() MWType { return mw.typ }

// Handle is the kernel's handle for the MW.
func (mw *MW) Handle() uint32 { return mw.handle }

// Close deallocates the window (DEALLOC_MW). Idempotent.
func (mw *MW) Close() error {
	// The span starts inside close: a Close after success is a no-op, not a call.
	return mw.close(func() (err error) {
		if sp := mw.pd.ctx.begin("DeallocMW"); sp.rec != nil {
			defer func() { sp.end(err) }()
		}
		err = mw.destroyKernel()
		if err == nil {
			if tr, ok := mw.pd.ctx.prov.(provider.MWTracker); ok {
				tr.MWFreed(mw.rkey)
			}
		}
		return err
	})
}

// destroyKernel is DeallocMW's command, out of Close's closure for the
// reason PD.destroyKernel gives.
func (mw *MW) destroyKernel() error {
	req := abi.IbUverbsDeallocMw{MwHandle: mw.handle}
	return mw.pd.ctx.destroyObject("DeallocMW", abi.UVERBS_OBJECT_MW, abi.UVERBS_METHOD_MW_DESTROY, mw.handle, 0, nil,
		&abi.Command{Num: abi.IB_USER_VERBS_CMD_DEALLOC_MW, In: abi.Bytes(&req)})
}
