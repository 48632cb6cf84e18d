package uverbs

import (
	"fmt"
	"os"
	"runtime"

	"github.com/goverbs/goverbs/abi"
	"golang.org/x/sys/unix"
)

// XRCD is an XRC domain (libibverbs' ibv_xrcd): the scope in which XRC
// target QPs and XRC SRQs are shared, across processes when it is tied to
// a file. It is safe for concurrent use; Close is idempotent and returns
// nil after the Context closed.
type XRCD struct {
	ctx    *Context
	handle uint32
	lifetime
}

// XRCDOptions say which domain OpenXRCD opens (struct ibv_xrcd_init_attr).
type XRCDOptions struct {
	// File ties the domain to a file: every process that opens the domain
	// through the same file (inode) on the same device shares it. Nil: a
	// new domain of this context alone (fd -1).
	File *os.File
	// Create creates the file's domain if it has none (O_CREAT);
	// Exclusive fails if it has one (O_EXCL, with Create).
	Create, Exclusive bool
}

// OpenXRCD opens an XRC domain (ibv_open_xrcd: OPEN_XRCD, one syscall
// after the capability check). A device without XRC (no DeviceXRC in its
// capabilities: rxe and siw, whose kernel drivers have no alloc_xrcd) is
// refused with ErrNotSupported before any command.
func (c *Context) OpenXRCD(o XRCDOptions) (_ *XRCD, err error) {
	const verb = "OpenXRCD"
	if sp := c.begin(verb); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	if !c.skipCapChecks {
		a, err := c.capabilities()
		if err != nil {
			return nil, err
		}
		if a.CapFlags&DeviceXRC == 0 {
			return nil, opError(verb, c.dev.Name, abi.TransportNone,
				fmt.Errorf("%w: the device has no XRC (no XRC in its capability flags)", ErrNotSupported))
		}
	}
	if o.Exclusive && !o.Create {
		return nil, argError(verb, c.dev.Name, "Exclusive without Create")
	}
	req := abi.IbUverbsOpenXrcd{Fd: ^uint32(0)}
	if o.File != nil {
		req.Fd = uint32(o.File.Fd())
	}
	if o.Create {
		req.Oflags |= unix.O_CREAT
	}
	if o.Exclusive {
		req.Oflags |= unix.O_EXCL
	}
	var resp abi.IbUverbsOpenXrcdResp
	cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_OPEN_XRCD, In: abi.Bytes(&req), Out: abi.Bytes(&resp)}
	err = c.invoke(verb, &cmd)
	if o.File != nil {
		// The kernel has taken what it needs of the file (its inode).
		runtime.KeepAlive(o.File)
	}
	if err != nil {
		return nil, err
	}
	return &XRCD{ctx: c, handle: resp.XrcdHandle}, nil
}

// Context is the context the domain was opened on.
func (x *XRCD) Context() *Context { return x.ctx }

// Handle is the kernel's handle for the domain.
func (x *XRCD) Handle() uint32 { return x.handle }

// Close closes the domain (ibv_close_xrcd: the XRCD's DESTROY, or
// CLOSE_XRCD). Idempotent.
func (x *XRCD) Close() error {
	return x.close(func() (err error) {
		if sp := x.ctx.begin("CloseXRCD"); sp.rec != nil {
			defer func() { sp.end(err) }()
		}
		return x.destroyKernel()
	})
}

// destroyKernel is CloseXRCD's command, out of Close's closure for the
// reason PD.destroyKernel gives.
func (x *XRCD) destroyKernel() error {
	req := abi.IbUverbsCloseXrcd{XrcdHandle: x.handle}
	return x.ctx.destroyObject("CloseXRCD", abi.UVERBS_OBJECT_XRCD, abi.UVERBS_METHOD_XRCD_DESTROY, x.handle, 0, nil,
		&abi.Command{Num: abi.IB_USER_VERBS_CMD_CLOSE_XRCD, In: abi.Bytes(&req)})
}
