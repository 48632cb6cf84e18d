package rxe

import (
	"sync"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// Driver is the rxe provider. uverbs registers it for RDMA_DRIVER_RXE.
type Driver struct{}

// Name is rdma-core's name for the provider.
func (Driver) Name() string { return "rxe" }

// NewContext opens the provider's side of a context. rxe takes no driver
// data for GET_CONTEXT (nor for PD and MR commands).
func (Driver) NewContext(k provider.Kernel) (provider.Context, error) {
	if err := k.GetContext(nil, nil); err != nil {
		return nil, err
	}
	return &Context{k: k, f: k.File()}, nil
}

// Context is an rxe context: the command file the queues are mapped from and
// the doorbells are written to.
type Context struct {
	k provider.Kernel
	f *abi.File

	qpMu sync.Mutex
	qps  map[uint32]*QP // RC and UC QPs by number, for errorCompletion
}

// errorCompletion marks the RC or UC QP qpn in ERR: the kernel moved it
// there when it completed one of its work requests with an error other
// than a flush. 5.10's requester does not flush sends posted to a QP in
// ERR (PostSend then moves it to ERR again, which does), and the QP may
// have got there by itself: a retry-exceeded send, a remote access error.
func (c *Context) errorCompletion(qpn uint32) {
	c.qpMu.Lock()
	qp := c.qps[qpn]
	c.qpMu.Unlock()
	if qp != nil {
		qp.state.Store(uint32(provider.QPStateErr))
	}
}

var _ provider.Context = (*Context)(nil)

// Udata returns the driver data of the verbs without provider state. Only
// MODIFY_SRQ has any: the kernel requires struct rxe_modify_srq_cmd
// {mmap_info_addr} (inlen ≥ 8) on every modify. Its address is 0: a limit
// change works, and a resize (IB_SRQ_MAX_WR) fails with EFAULT before the
// kernel changes anything, since this provider cannot remap a resized SRQ.
func (c *Context) Udata(v provider.Verb) (in, out []byte) {
	if v == provider.VerbModifySRQ {
		var cmd abi.RxeModifySrqCmd
		return append([]byte(nil), abi.Bytes(&cmd)...), nil
	}
	return nil, nil
}

// Close releases nothing: every queue mapping belongs to its object.
func (c *Context) Close() error { return nil }
