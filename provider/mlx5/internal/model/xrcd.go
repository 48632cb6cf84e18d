package model

import (
	"github.com/goverbs/goverbs/abi"
	"golang.org/x/sys/unix"
)

// XRC domains (ib_uverbs_open_xrcd, mlx5_ib_alloc_xrcd): a domain tied to
// a file is shared by every open of that file's inode on the device; fd -1
// opens a domain of its own. The device must have the xrc capability.

const devCapXRC = 1 << 20 // IB_DEVICE_XRC

// xrcdomain is one XRC domain of the device.
type xrcdomain struct {
	inode [2]uint64 // st_dev, st_ino; zero for a domain without a file
	refs  int       // XRCD objects (opens) holding it
}

// mxrcd is one open of a domain: an XRCD object of a context.
type mxrcd struct {
	handle uint32
	x      *xrcdomain
}

func (u *ufile) cmdOpenXRCD(in, out, din, dout []byte) error {
	var req abi.IbUverbsOpenXrcd
	copy(abi.Bytes(&req), in)
	d := u.d
	var x *xrcdomain
	var inode [2]uint64
	if int32(req.Fd) != -1 {
		var st unix.Stat_t
		if err := unix.Fstat(int(int32(req.Fd)), &st); err != nil {
			return unix.EBADF
		}
		inode = [2]uint64{uint64(st.Dev), st.Ino}
		x = d.xrcds[inode]
		if x == nil && req.Oflags&unix.O_CREAT == 0 {
			return unix.EAGAIN // no domain for the file, and no O_CREAT
		}
		if x != nil && req.Oflags&unix.O_EXCL != 0 {
			return unix.EINVAL
		}
	}
	if x == nil {
		if d.o.NoXRC {
			return unix.EOPNOTSUPP // no xrc capability: mlx5_ib_alloc_xrcd refuses
		}
		x = &xrcdomain{inode: inode}
		if inode != ([2]uint64{}) {
			d.xrcds[inode] = x
		}
	}
	x.refs++
	o := &mxrcd{x: x}
	o.handle = u.ctx.add(o)
	r := abi.IbUverbsOpenXrcdResp{XrcdHandle: o.handle}
	copy(out, abi.Bytes(&r))
	return nil
}

func (u *ufile) closeXRCD(h uint32) error {
	o, ok := u.ctx.objs[h].(*mxrcd)
	if !ok {
		return unix.EINVAL
	}
	delete(u.ctx.objs, h)
	u.d.dropXRCD(o.x)
	return nil
}

// dropXRCD releases one open of a domain; the last frees it.
func (d *Device) dropXRCD(x *xrcdomain) {
	x.refs--
	if x.refs == 0 && x.inode != ([2]uint64{}) {
		delete(d.xrcds, x.inode)
	}
}

func (u *ufile) cmdCloseXRCD(in, out, din, dout []byte) error {
	var req abi.IbUverbsCloseXrcd
	copy(abi.Bytes(&req), in)
	return u.closeXRCD(req.XrcdHandle)
}

// XRCDomains is the number of XRC domains the device holds (tied to a file
// or not, counting each once however often it is open).
func (d *Device) XRCDomains() (tied, opens int) {
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	for _, f := range d.files {
		if f.ctx == nil {
			continue
		}
		for _, o := range f.ctx.objs {
			if _, ok := o.(*mxrcd); ok {
				opens++
			}
		}
	}
	return len(d.xrcds), opens
}
