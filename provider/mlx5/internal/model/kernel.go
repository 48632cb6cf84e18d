package model

import (
	"encoding/binary"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/internal/kernel"
	"github.com/goverbs/goverbs/mmap"
	"golang.org/x/sys/unix"
)

var (
	ne = binary.NativeEndian
	be = binary.BigEndian
)

// The ioctl framing (rdma/rdma_user_ioctl_cmds.h).
const (
	rdmaVerbsIoctl  = 0xC0181B01
	ioctlHdrSize    = 24
	ioctlAttrSize   = 16
	attrValidOutput = 2
	attrUHWIn       = 0x1000
	attrUHWOut      = 0x1001
	driverMLX5      = 1

	// mmap command of the dynamic UAR pages the model hands out (any page
	// offset the driver chooses is valid; this one is the model's).
	mmapDynamic = 0x80
)

// ufile is one open uverbs file.
type ufile struct {
	d   *Device
	fd  int
	ctx *ucontext
}

// fakeKernel is the kernel side of every file of a device.
type fakeKernel struct{ d *Device }

func (d *Device) open() (int, kernel.Kernel, error) {
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	fd := d.nextFD
	d.nextFD++
	d.files[fd] = &ufile{d: d, fd: fd}
	return fd, fakeKernel{d}, nil
}

func (k fakeKernel) file(fd int) (*ufile, error) {
	u, ok := k.d.files[fd]
	if !ok {
		return nil, unix.EBADF
	}
	if k.d.lost {
		return nil, unix.EIO // disassociated
	}
	return u, nil
}

// attr is one ioctl attribute as the kernel sees it.
type attr struct {
	id, len, flags uint16
	data           uint64
	off            int // where it sits in the call's buffer
}

// call is one RDMA_VERBS_IOCTL.
type call struct {
	arg            []byte
	object, method uint16
	attrs          []attr
}

func (c *call) find(id uint16) *attr {
	for i := range c.attrs {
		if c.attrs[i].id == id {
			return &c.attrs[i]
		}
	}
	return nil
}

// in returns a PTR_IN attribute's bytes (inline up to 8 bytes).
func (c *call) in(id uint16) ([]byte, bool) {
	a := c.find(id)
	if a == nil {
		return nil, false
	}
	if a.len <= 8 {
		var b [8]byte
		ne.PutUint64(b[:], a.data)
		return b[:a.len], true
	}
	return kernel.UserMemory(a.data, int(a.len)), true
}

// u64 returns an inline value (CONST_IN, small PTR_IN, IDR handle, FD).
func (c *call) u64(id uint16) (uint64, bool) {
	a := c.find(id)
	if a == nil {
		return 0, false
	}
	if a.len > 0 && a.len < 8 {
		return a.data & (1<<(8*a.len) - 1), true
	}
	return a.data, true
}

// out returns a PTR_OUT attribute's buffer and marks it written.
func (c *call) out(id uint16) ([]byte, bool) {
	a := c.find(id)
	if a == nil {
		return nil, false
	}
	a.flags |= attrValidOutput
	ne.PutUint16(c.arg[a.off+4:], a.flags)
	return kernel.UserMemory(a.data, int(a.len)), true
}

// setData writes a new object's handle or fd back into its attribute.
func (c *call) setData(id uint16, v uint64) {
	if a := c.find(id); a != nil {
		ne.PutUint64(c.arg[a.off+8:], v)
	}
}

func (k fakeKernel) Ioctl(fd int, req uint, arg []byte) error {
	d := k.d
	if req != rdmaVerbsIoctl || d.o.NoIoctl {
		return unix.ENOTTY
	}
	if len(arg) < ioctlHdrSize {
		return unix.EINVAL
	}
	c := &call{arg: arg, object: ne.Uint16(arg[2:]), method: ne.Uint16(arg[4:])}
	n := int(ne.Uint16(arg[6:]))
	if int(ne.Uint16(arg[0:])) != len(arg) || len(arg) != ioctlHdrSize+n*ioctlAttrSize {
		return unix.EINVAL
	}
	if ne.Uint64(arg[8:]) != 0 || ne.Uint32(arg[20:]) != 0 {
		return unix.EPROTONOSUPPORT
	}
	if ne.Uint32(arg[16:]) != driverMLX5 {
		return unix.EINVAL
	}
	for i := 0; i < n; i++ {
		o := ioctlHdrSize + i*ioctlAttrSize
		a := attr{id: ne.Uint16(arg[o:]), len: ne.Uint16(arg[o+2:]), flags: ne.Uint16(arg[o+4:]), data: ne.Uint64(arg[o+8:]), off: o}
		if c.find(a.id) != nil {
			return unix.EINVAL
		}
		c.attrs = append(c.attrs, a)
	}
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	u, err := k.file(fd)
	if err != nil {
		return err
	}
	return u.ioctl(c)
}

// cmdSpec is a write-style command: the size of its core request (with the
// response pointer of legacy commands) and core response, and its handler.
type cmdSpec struct {
	in, out int
	f       func(u *ufile, in, out, din, dout []byte) error
}

func size[T any]() int { var v T; return len(abi.Bytes(&v)) }

var legacyCmds, exCmds map[uint32]cmdSpec

func init() {
	legacyCmds = map[uint32]cmdSpec{
		abi.IB_USER_VERBS_CMD_GET_CONTEXT:         {size[abi.IbUverbsGetContext](), size[abi.IbUverbsGetContextResp](), (*ufile).cmdGetContext},
		abi.IB_USER_VERBS_CMD_QUERY_DEVICE:        {size[abi.IbUverbsQueryDevice](), size[abi.IbUverbsQueryDeviceResp](), (*ufile).cmdQueryDevice},
		abi.IB_USER_VERBS_CMD_QUERY_PORT:          {size[abi.IbUverbsQueryPort](), size[abi.IbUverbsQueryPortResp](), (*ufile).cmdQueryPort},
		abi.IB_USER_VERBS_CMD_ALLOC_PD:            {size[abi.IbUverbsAllocPd](), size[abi.IbUverbsAllocPdResp](), (*ufile).cmdAllocPD},
		abi.IB_USER_VERBS_CMD_DEALLOC_PD:          {size[abi.IbUverbsDeallocPd](), 0, (*ufile).cmdDeallocPD},
		abi.IB_USER_VERBS_CMD_CREATE_AH:           {size[abi.IbUverbsCreateAh](), size[abi.IbUverbsCreateAhResp](), (*ufile).cmdCreateAH},
		abi.IB_USER_VERBS_CMD_DESTROY_AH:          {size[abi.IbUverbsDestroyAh](), 0, (*ufile).cmdDestroyAH},
		abi.IB_USER_VERBS_CMD_REG_MR:              {size[abi.IbUverbsRegMr](), size[abi.IbUverbsRegMrResp](), (*ufile).cmdRegMR},
		abi.IB_USER_VERBS_CMD_DEREG_MR:            {size[abi.IbUverbsDeregMr](), 0, (*ufile).cmdDeregMR},
		abi.IB_USER_VERBS_CMD_OPEN_XRCD:           {size[abi.IbUverbsOpenXrcd](), size[abi.IbUverbsOpenXrcdResp](), (*ufile).cmdOpenXRCD},
		abi.IB_USER_VERBS_CMD_CLOSE_XRCD:          {size[abi.IbUverbsCloseXrcd](), 0, (*ufile).cmdCloseXRCD},
		abi.IB_USER_VERBS_CMD_ALLOC_MW:            {size[abi.IbUverbsAllocMw](), size[abi.IbUverbsAllocMwResp](), (*ufile).cmdAllocMW},
		abi.IB_USER_VERBS_CMD_DEALLOC_MW:          {size[abi.IbUverbsDeallocMw](), 0, (*ufile).cmdDeallocMW},
		abi.IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL: {size[abi.IbUverbsCreateCompChannel](), size[abi.IbUverbsCreateCompChannelResp](), (*ufile).cmdCreateCompChannel},
		abi.IB_USER_VERBS_CMD_CREATE_CQ:           {size[abi.IbUverbsCreateCq](), size[abi.IbUverbsCreateCqResp](), (*ufile).cmdCreateCQ},
		abi.IB_USER_VERBS_CMD_RESIZE_CQ:           {size[abi.IbUverbsResizeCq](), size[abi.IbUverbsResizeCqResp](), (*ufile).cmdResizeCQ},
		abi.IB_USER_VERBS_CMD_DESTROY_CQ:          {size[abi.IbUverbsDestroyCq](), size[abi.IbUverbsDestroyCqResp](), (*ufile).cmdDestroyCQ},
		abi.IB_USER_VERBS_CMD_CREATE_QP:           {size[abi.IbUverbsCreateQp](), size[abi.IbUverbsCreateQpResp](), (*ufile).cmdCreateQP},
		abi.IB_USER_VERBS_CMD_QUERY_QP:            {size[abi.IbUverbsQueryQp](), size[abi.IbUverbsQueryQpResp](), (*ufile).cmdQueryQP},
		abi.IB_USER_VERBS_CMD_MODIFY_QP:           {size[abi.IbUverbsModifyQp](), 0, (*ufile).cmdModifyQP},
		abi.IB_USER_VERBS_CMD_DESTROY_QP:          {size[abi.IbUverbsDestroyQp](), size[abi.IbUverbsDestroyQpResp](), (*ufile).cmdDestroyQP},
		abi.IB_USER_VERBS_CMD_CREATE_SRQ:          {size[abi.IbUverbsCreateSrq](), size[abi.IbUverbsCreateSrqResp](), (*ufile).cmdCreateSRQ},
		abi.IB_USER_VERBS_CMD_MODIFY_SRQ:          {size[abi.IbUverbsModifySrq](), 0, (*ufile).cmdModifySRQ},
		abi.IB_USER_VERBS_CMD_QUERY_SRQ:           {size[abi.IbUverbsQuerySrq](), size[abi.IbUverbsQuerySrqResp](), (*ufile).cmdQuerySRQ},
		abi.IB_USER_VERBS_CMD_DESTROY_SRQ:         {size[abi.IbUverbsDestroySrq](), size[abi.IbUverbsDestroySrqResp](), (*ufile).cmdDestroySRQ},
		abi.IB_USER_VERBS_CMD_CREATE_XSRQ:         {size[abi.IbUverbsCreateXsrq](), size[abi.IbUverbsCreateSrqResp](), (*ufile).cmdCreateXSRQ},
		abi.IB_USER_VERBS_CMD_OPEN_QP:             {size[abi.IbUverbsOpenQp](), size[abi.IbUverbsCreateQpResp](), (*ufile).cmdOpenQP},
	}
	exCmds = map[uint32]cmdSpec{
		abi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE: {size[abi.IbUverbsExQueryDevice](), size[abi.IbUverbsQueryDeviceResp](), (*ufile).cmdExQueryDevice},
		abi.IB_USER_VERBS_EX_CMD_CREATE_CQ:    {size[abi.IbUverbsExCreateCq](), size[abi.IbUverbsCreateCqResp](), (*ufile).cmdExCreateCQ},
		abi.IB_USER_VERBS_EX_CMD_CREATE_QP:    {size[abi.IbUverbsExCreateQp](), size[abi.IbUverbsCreateQpResp](), (*ufile).cmdExCreateQP},
		abi.IB_USER_VERBS_EX_CMD_MODIFY_QP:    {size[abi.IbUverbsExModifyQp](), 0, (*ufile).cmdExModifyQP},
		abi.IB_USER_VERBS_EX_CMD_MODIFY_CQ:    {size[abi.IbUverbsExModifyCq](), 0, (*ufile).cmdExModifyCQ},
	}
}

// command runs write-style command num (with the extended flag) on its
// core request and response and the driver data: what write() and
// INVOKE_WRITE both end in.
func (u *ufile) command(num uint32, in, out, din, dout []byte) error {
	var spec cmdSpec
	var ok bool
	if num&abi.IB_USER_VERBS_CMD_FLAG_EXTENDED != 0 {
		spec, ok = exCmds[num&abi.IB_USER_VERBS_CMD_COMMAND_MASK]
	} else {
		spec, ok = legacyCmds[num]
	}
	if !ok {
		return unix.EOPNOTSUPP
	}
	if len(in) < spec.in {
		return unix.EINVAL
	}
	if len(out) < spec.out {
		return unix.ENOSPC
	}
	if num != abi.IB_USER_VERBS_CMD_GET_CONTEXT && u.ctx == nil {
		return unix.EINVAL
	}
	return spec.f(u, in[:spec.in], out, din, dout)
}

// Doorbell is a write to the fake.
func (k fakeKernel) Doorbell(fd int, p []byte) (int, error) { return k.Write(fd, p) }

func (k fakeKernel) Write(fd int, p []byte) (int, error) {
	d := k.d
	if len(p) < 8 {
		return 0, unix.EINVAL
	}
	num := ne.Uint32(p[0:])
	inW, outW := int(ne.Uint16(p[4:])), int(ne.Uint16(p[6:]))
	var in, out, din, dout []byte
	if num&abi.IB_USER_VERBS_CMD_FLAG_EXTENDED != 0 {
		if num&^(abi.IB_USER_VERBS_CMD_FLAG_EXTENDED|abi.IB_USER_VERBS_CMD_COMMAND_MASK) != 0 || len(p) < 24 {
			return 0, unix.EINVAL
		}
		resp := ne.Uint64(p[8:])
		pin, pout := int(ne.Uint16(p[16:])), int(ne.Uint16(p[18:]))
		if len(p) != 24+inW*8+pin*8 || ne.Uint32(p[20:]) != 0 {
			return 0, unix.EINVAL
		}
		in, din = p[24:24+inW*8], p[24+inW*8:]
		out = kernel.UserMemory(resp, outW*8)
		dout = kernel.UserMemory(resp+uint64(outW)*8, pout*8)
	} else {
		if num > abi.IB_USER_VERBS_CMD_COMMAND_MASK || inW*4 != len(p) {
			return 0, unix.EINVAL
		}
		body := p[8:]
		spec, ok := legacyCmds[num]
		if !ok {
			return 0, unix.EOPNOTSUPP
		}
		if len(body) < spec.in {
			return 0, unix.EINVAL
		}
		in, din = body[:spec.in], body[spec.in:]
		if spec.out > 0 {
			if outW*4 < spec.out {
				return 0, unix.ENOSPC
			}
			resp := ne.Uint64(body[0:])
			out = kernel.UserMemory(resp, spec.out)
			dout = kernel.UserMemory(resp+uint64(spec.out), outW*4-spec.out)
		}
	}
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	u, err := k.file(fd)
	if err != nil {
		return 0, err
	}
	if err := u.command(num, in, out, din, dout); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (k fakeKernel) Mmap(fd int, offset int64, length int) ([]byte, error) {
	d := k.d
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	u, err := k.file(fd)
	if err != nil {
		return nil, err
	}
	ps := int64(mmap.PageSize())
	if u.ctx == nil || offset%ps != 0 || length != int(ps) {
		return nil, unix.EINVAL
	}
	pg := offset / ps
	cmd := int(pg>>8) & 0xff
	idx := int(pg&0xff) | int(pg>>16)<<8
	var p *uarPage
	switch cmd {
	case mmapDynamic:
		p = u.ctx.dynPages[uint32(idx)]
	case abi.MLX5_IB_MMAP_WC_PAGE:
		if d.o.NoWC {
			return nil, unix.EPERM
		}
		fallthrough
	case abi.MLX5_IB_MMAP_REGULAR_PAGE, abi.MLX5_IB_MMAP_NC_PAGE:
		if idx < len(u.ctx.staticPages) {
			p = u.ctx.staticPages[idx]
		}
	}
	if p == nil {
		return nil, unix.EINVAL
	}
	p.maps++
	d.stats.UARMappings++
	return p.mem.Bytes(), nil
}

func (k fakeKernel) Munmap(b []byte) error {
	d := k.d
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	for _, u := range d.files {
		if u.ctx == nil {
			continue
		}
		for _, p := range u.ctx.pages() {
			if p.maps > 0 && len(b) > 0 && p.mem.Len() > 0 && &p.mem.Bytes()[0] == &b[0] {
				p.maps--
				d.stats.UARMappings--
				u.ctx.maybeFree(p)
				return nil
			}
		}
	}
	for _, p := range d.orphans {
		if p.maps > 0 && len(b) > 0 && &p.mem.Bytes()[0] == &b[0] {
			p.maps--
			d.stats.UARMappings--
			if p.maps == 0 {
				p.mem.Close()
			}
			return nil
		}
	}
	return unix.EINVAL
}

func (k fakeKernel) Close(fd int) error {
	d := k.d
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	u, ok := d.files[fd] // closing works on a disassociated device too
	if !ok {
		return unix.EBADF
	}
	u.release()
	delete(d.files, fd)
	return nil
}
