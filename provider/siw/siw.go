package siw

import (
	"errors"
	"sync/atomic"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/provider/internal/writedoorbell"
	"golang.org/x/sys/unix"
)

// Driver is the siw provider. uverbs registers it for RDMA_DRIVER_SIW.
type Driver struct{}

// Name is rdma-core's name for the provider.
func (Driver) Name() string { return "siw" }

// NewContext opens a context: siw answers GET_CONTEXT with
// siw_uresp_alloc_ctx and refuses a shorter response (EINVAL).
func (Driver) NewContext(k provider.Kernel) (provider.Context, error) {
	// The response is read into the context it makes: it escapes through
	// the Kernel interface, and on its own would be a second allocation.
	c := &Context{k: k, f: k.File()}
	if err := k.GetContext(nil, abi.Bytes(&c.resp)); err != nil {
		return nil, err
	}
	return c, nil
}

// Context is a siw context: the command file the rings are mapped from and
// the doorbells are written to.
type Context struct {
	k    provider.Kernel
	f    *abi.File
	resp abi.SiwUrespAllocCtx // GET_CONTEXT's answer (NewContext): the device's dev_id
	// lost is set when the device is gone (DeviceLost): every fast path
	// then fails with errDeviceLost.
	lost atomic.Bool
}

var (
	_ provider.Context     = (*Context)(nil)
	_ provider.DeviceLoser = (*Context)(nil)
)

// DeviceLost is called on DEVICE_FATAL (the device is being removed). Two
// kernel behaviours follow it: a kernel whose siw cannot disassociate a
// context keeps it working until it is closed (the removal waits for it),
// and then nothing changes here; a kernel that disassociates it revokes
// the rings, answers EIO to every command and completes nothing more. So
// DeviceLost asks the kernel which one: a doorbell for a QP handle no QP
// has is refused with EIO only by a disassociated context (EINVAL
// otherwise). If it is, every fast-path call fails with an EIO from now on
// (a *WRError wrapping it for the posts). The core maps a zeroed page in
// place of a revoked ring, so a call already in progress when DeviceLost
// runs reads and writes that page and nothing else.
func (c *Context) DeviceLost() {
	if err := c.f.Write(writedoorbell.New(^uint32(0)).Cmd[:]); errors.Is(err, unix.EIO) {
		c.lost.Store(true)
	}
}

// Udata: siw's REG_MR reads siw_ureq_reg_mr and writes siw_uresp_reg_mr,
// and fails when either is missing.
func (c *Context) Udata(v provider.Verb) (in, out []byte) {
	if v == provider.VerbRegMR {
		var req abi.SiwUreqRegMr
		var resp abi.SiwUrespRegMr
		return abi.Bytes(&req), abi.Bytes(&resp)
	}
	return nil, nil
}

// Close releases nothing: every mapping belongs to its object.
func (c *Context) Close() error { return nil }

// CreateAH: iWARP has no address handles; the kernel refuses the command.
func (c *Context) CreateAH(provider.AHAttr) (provider.Setup[provider.AHCreated, provider.AH], error) {
	return &provider.SetupFunc[provider.AHCreated, provider.AH]{
		Done: func(provider.AHCreated, []byte) (provider.AH, error) { return ah{}, nil },
	}, nil
}

type ah struct{}

func (ah) Close() error { return nil }
