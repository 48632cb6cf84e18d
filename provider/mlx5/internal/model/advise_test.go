package model

import (
	"errors"
	"math"
	"testing"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// rawAttr is one attribute of a hand-built RDMA_VERBS_IOCTL.
type rawAttr struct {
	id, len, flags, reserved uint16
	data                     uint64
}

// rawFile is a context of a model device, opened through uverbs, with the
// model's descriptor of it, for commands uverbs would refuse to send.
type rawFile struct {
	d   *Device
	fd  int
	ctx *uverbs.Context
	pd  *uverbs.PD
	mem *mmap.Region // scratch user memory for pointers
}

func openRaw(t *testing.T, o Options) *rawFile {
	t.Helper()
	f := NewFabric()
	d, err := f.Add(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	ctx, err := uverbs.Open(uverbs.Device{Name: d.Name(), Driver: uverbs.DriverMLX5, CharDev: d.CharDev()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctx.Close() })
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	mem, err := mmap.Anonymous(mmap.PageSize())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	r := &rawFile{d: d, fd: -1, ctx: ctx, pd: pd, mem: mem}
	d.f.mu.Lock()
	for fd, u := range d.files {
		if u.ctx != nil {
			r.fd = fd
		}
	}
	d.f.mu.Unlock()
	return r
}

// ioctl sends object/method with attrs to the model's kernel.
func (r *rawFile) ioctl(object, method uint16, attrs ...rawAttr) error {
	arg := make([]byte, ioctlHdrSize+len(attrs)*ioctlAttrSize)
	ne.PutUint16(arg[0:], uint16(len(arg)))
	ne.PutUint16(arg[2:], object)
	ne.PutUint16(arg[4:], method)
	ne.PutUint16(arg[6:], uint16(len(attrs)))
	ne.PutUint32(arg[16:], driverMLX5)
	for i, a := range attrs {
		o := ioctlHdrSize + i*ioctlAttrSize
		ne.PutUint16(arg[o:], a.id)
		ne.PutUint16(arg[o+2:], a.len)
		ne.PutUint16(arg[o+4:], a.flags)
		ne.PutUint16(arg[o+6:], a.reserved)
		ne.PutUint64(arg[o+8:], a.data)
	}
	return fakeKernel{r.d}.Ioctl(r.fd, rdmaVerbsIoctl, arg)
}

// regMR sends a legacy REG_MR write command and returns the lkey.
func (r *rawFile) regMR(start, length, iova uint64, access uint32) (uint32, error) {
	resp := r.mem.Bytes()[2048:]
	req := abi.IbUverbsRegMr{Response: uint64(r.mem.Addr()) + 2048, Start: start, Length: length, HcaVa: iova,
		PdHandle: r.pd.Handle(), AccessFlags: access}
	body := abi.Bytes(&req)
	p := make([]byte, 8+len(body))
	ne.PutUint32(p[0:], abi.IB_USER_VERBS_CMD_REG_MR)
	ne.PutUint16(p[4:], uint16(len(p)/4))
	ne.PutUint16(p[6:], uint16(size[abi.IbUverbsRegMrResp]()/4))
	copy(p[8:], body)
	if _, err := (fakeKernel{r.d}).Write(r.fd, p); err != nil {
		return 0, err
	}
	var rr abi.IbUverbsRegMrResp
	copy(abi.Bytes(&rr), resp)
	return rr.Lkey, nil
}

// TestAdviseMRKernelChecks: the answers of ADVISE_MR that uverbs' own
// checks keep programs from seeing, as Linux 6.1's ioctl framework, its
// handler (uverbs_std_types_mr.c) and mlx5_ib_advise_mr give them: an
// advice the driver does not know EOPNOTSUPP, one beyond the enum's type
// EINVAL; a flag other than FLUSH EINVAL; an SGE list not a whole number
// of entries EINVAL, shorter than one EINVAL; an advice attribute of 4
// bytes EINVAL; a mandatory attribute missing EINVAL; an unknown attribute
// flagged mandatory EPROTONOSUPPORT, ignored otherwise; a PD handle naming
// nothing ENOENT, naming an MR EINVAL, with a length EINVAL; the method
// asked of the PD object (there is none) EPROTONOSUPPORT; and on a device
// without ODP the method exists and answers EOPNOTSUPP, after the PD.
func TestAdviseMRKernelChecks(t *testing.T) {
	r := openRaw(t, Options{ODP: true})
	ps := uint64(mmap.PageSize())
	lkey, err := r.regMR(uint64(r.mem.Addr()), ps, uint64(r.mem.Addr()), abi.IB_UVERBS_ACCESS_LOCAL_WRITE|abi.IB_UVERBS_ACCESS_ON_DEMAND)
	if err != nil {
		t.Fatal(err)
	}
	// One SGE at the scratch page's start, the list itself at 1024.
	sgl := r.mem.Bytes()[1024:]
	s := abi.IbUverbsSge{Addr: uint64(r.mem.Addr()), Length: 64, Lkey: lkey}
	copy(sgl, abi.Bytes(&s))
	list := uint64(r.mem.Addr()) + 1024
	pdA := rawAttr{id: abi.UVERBS_ATTR_ADVISE_MR_PD_HANDLE, data: uint64(r.pd.Handle())}
	adv := func(a uint64) rawAttr { return rawAttr{id: abi.UVERBS_ATTR_ADVISE_MR_ADVICE, len: 8, data: a} }
	flags := func(f uint64) rawAttr { return rawAttr{id: abi.UVERBS_ATTR_ADVISE_MR_FLAGS, len: 4, data: f} }
	sges := func(n uint16) rawAttr { return rawAttr{id: abi.UVERBS_ATTR_ADVISE_MR_SGE_LIST, len: n, data: list} }
	const obj, meth = abi.UVERBS_OBJECT_MR, abi.UVERBS_METHOD_ADVISE_MR
	for _, c := range []struct {
		name  string
		attrs []rawAttr
		want  error
	}{
		{"a good call", []rawAttr{pdA, adv(0), flags(1), sges(16)}, nil},
		{"8-byte flags", []rawAttr{pdA, adv(0), {id: abi.UVERBS_ATTR_ADVISE_MR_FLAGS, len: 8, data: 1}, sges(16)}, nil},
		{"advice 3", []rawAttr{pdA, adv(3), flags(1), sges(16)}, unix.EOPNOTSUPP},
		{"advice 2^32", []rawAttr{pdA, adv(1 << 32), flags(1), sges(16)}, unix.EINVAL},
		{"flag 2", []rawAttr{pdA, adv(0), flags(3), sges(16)}, unix.EINVAL},
		{"a 24-byte SGE list", []rawAttr{pdA, adv(0), flags(1), sges(24)}, unix.EINVAL},
		{"an 8-byte SGE list", []rawAttr{pdA, adv(0), flags(1), sges(8)}, unix.EINVAL},
		{"a 4-byte advice", []rawAttr{pdA, {id: abi.UVERBS_ATTR_ADVISE_MR_ADVICE, len: 4}, flags(1), sges(16)}, unix.EINVAL},
		{"no flags", []rawAttr{pdA, adv(0), sges(16)}, unix.EINVAL},
		{"an unknown mandatory attribute", []rawAttr{pdA, adv(0), flags(1), sges(16), {id: 9, flags: abi.UVERBS_ATTR_F_MANDATORY}}, unix.EPROTONOSUPPORT},
		{"an unknown optional attribute", []rawAttr{pdA, adv(0), flags(1), sges(16), {id: 9}}, nil},
		{"a PD handle naming nothing", []rawAttr{{id: abi.UVERBS_ATTR_ADVISE_MR_PD_HANDLE, data: 999}, adv(0), flags(1), sges(16)}, unix.ENOENT},
		{"a PD handle with a length", []rawAttr{{id: abi.UVERBS_ATTR_ADVISE_MR_PD_HANDLE, len: 4, data: uint64(r.pd.Handle())}, adv(0), flags(1), sges(16)}, unix.EINVAL},
	} {
		if err := r.ioctl(obj, meth, c.attrs...); !errors.Is(err, c.want) && !(c.want == nil && err == nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// A handle of an MR where the PD's belongs.
	var mrHandle uint32
	r.d.f.mu.Lock()
	for h, o := range r.d.files[r.fd].ctx.objs {
		if _, ok := o.(*mmr); ok {
			mrHandle = h
		}
	}
	r.d.f.mu.Unlock()
	if err := r.ioctl(obj, meth, rawAttr{id: abi.UVERBS_ATTR_ADVISE_MR_PD_HANDLE, data: uint64(mrHandle)}, adv(0), flags(1), sges(16)); !errors.Is(err, unix.EINVAL) {
		t.Errorf("an MR's handle as the PD: %v, want EINVAL", err)
	}
	if err := r.ioctl(abi.UVERBS_OBJECT_PD, meth, pdA, adv(0), flags(1), sges(16)); !errors.Is(err, unix.EPROTONOSUPPORT) {
		t.Errorf("ADVISE_MR asked of the PD object: %v, want EPROTONOSUPPORT", err)
	}

	n := openRaw(t, Options{})
	nPD := rawAttr{id: abi.UVERBS_ATTR_ADVISE_MR_PD_HANDLE, data: uint64(n.pd.Handle())}
	if err := n.ioctl(obj, meth, nPD, adv(0), flags(1), sges(16)); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("ADVISE_MR without ODP: %v, want EOPNOTSUPP (no advise_mr)", err)
	}
	if err := n.ioctl(obj, meth, rawAttr{id: abi.UVERBS_ATTR_ADVISE_MR_PD_HANDLE, data: 999}, adv(0), flags(1), sges(16)); !errors.Is(err, unix.ENOENT) {
		t.Errorf("ADVISE_MR without ODP, a PD handle naming nothing: %v, want ENOENT (the framework's lookup comes first)", err)
	}
}

// TestImplicitODPRegChecks: REG_MR of the implicit range as
// create_user_odp_mr answers it: EINVAL with an I/O address other than 0,
// EINVAL on a device with ODP but not IB_ODP_SUPPORT_IMPLICIT, EINVAL
// without ODP (ib_check_mr_access); registered with it. A start of 0 with
// another length is an explicit ODP MR.
func TestImplicitODPRegChecks(t *testing.T) {
	const acc = abi.IB_UVERBS_ACCESS_LOCAL_WRITE | abi.IB_UVERBS_ACCESS_ON_DEMAND
	for _, c := range []struct {
		o            Options
		start, iova  uint64
		length       uint64
		want         error
		wantImplicit bool
	}{
		{Options{ImplicitODP: true}, 0, 0, math.MaxUint64, nil, true},
		{Options{ImplicitODP: true}, 0, 4096, math.MaxUint64, unix.EINVAL, false},
		{Options{ODP: true}, 0, 0, math.MaxUint64, unix.EINVAL, false},
		{Options{}, 0, 0, math.MaxUint64, unix.EINVAL, false},
		{Options{ImplicitODP: true}, 0, 0, 1 << 20, nil, false},
	} {
		r := openRaw(t, c.o)
		key, err := r.regMR(c.start, c.length, c.iova, acc)
		if !errors.Is(err, c.want) && !(c.want == nil && err == nil) {
			t.Errorf("%+v: REG_MR(%#x, %#x, iova %#x): %v, want %v", c.o, c.start, c.length, c.iova, err, c.want)
			continue
		}
		if err == nil {
			r.d.f.mu.Lock()
			m := r.d.mrs[key]
			r.d.f.mu.Unlock()
			if m == nil || m.implicit != c.wantImplicit {
				t.Errorf("%+v: REG_MR(%#x, %#x): MR %+v, want implicit %v", c.o, c.start, c.length, m, c.wantImplicit)
			}
		}
	}
}
