package rxe

import (
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
