package uverbs

import (
	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// PD is a protection domain: the scope of memory regions, queue pairs,
// shared receive queues and address handles.
//
// A PD is safe for concurrent use. Close waits for the verbs in flight on
// it (RegMR, CreateQP, … running in other goroutines) and then deallocates;
// after it, every verb on the PD returns an *OpError for which
// errors.Is(err, ErrClosed) holds, and the PD's handle never reaches the
// kernel again. The same holds once the PD's Context is closed.
type PD struct {
	ctx    *Context
	handle uint32
	lifetime
}

// AllocPD allocates a protection domain (ALLOC_PD: one syscall).
func (c *Context) AllocPD() (_ *PD, err error) {
	if sp := c.begin("AllocPD"); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	var req abi.IbUverbsAllocPd
	var resp abi.IbUverbsAllocPdResp
	in, out := c.prov.Udata(provider.VerbAllocPD)
	cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_ALLOC_PD, In: abi.Bytes(&req), Out: abi.Bytes(&resp), DriverIn: in, DriverOut: out, Quick: c.cpuOnly}
	if err := c.invoke("AllocPD", &cmd); err != nil {
		return nil, err
	}
	return &PD{ctx: c, handle: resp.PdHandle}, nil
}

// Context is the context the PD belongs to.
func (pd *PD) Context() *Context { return pd.ctx }

// Handle is the kernel's handle for the PD.
func (pd *PD) Handle() uint32 { return pd.handle }

// Close deallocates the PD. It fails with EBUSY while objects created in it
// are open; it is idempotent once it succeeded, and returns nil after the
// Context closed (the kernel deallocated the PD then).
func (pd *PD) Close() error {
	// The span starts inside close: a Close after success is a no-op, not a call.
	return pd.close(func() (err error) {
		if sp := pd.ctx.begin("DeallocPD"); sp.rec != nil {
			defer func() { sp.end(err) }()
		}
		return pd.destroyKernel()
	})
}

// destroyKernel is DeallocPD's command. It is a method, not part of
// Close's closure, because Close is inlined into its callers: a closure
// compiled in another package took the command's address without
// abi.Bytes inlined, and the command escaped to the heap (one allocation
// a Close, TestAllocsCloseFromOtherPackage).
func (pd *PD) destroyKernel() error {
	req := abi.IbUverbsDeallocPd{PdHandle: pd.handle}
	return pd.ctx.destroyObject("DeallocPD", abi.UVERBS_OBJECT_PD, abi.UVERBS_METHOD_PD_DESTROY, pd.handle, 0, nil,
		&abi.Command{Num: abi.IB_USER_VERBS_CMD_DEALLOC_PD, In: abi.Bytes(&req), Quick: pd.ctx.cpuOnly})
}
