package abi

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/goverbs/goverbs/internal/kernel"
	"golang.org/x/sys/unix"
)

var ne = binary.NativeEndian

type seenAttr struct {
	id, len, flags uint16
	data           uint64
	bytes          []byte // what the kernel would read for a PTR_IN
}

type seenIoctl struct {
	object, method, numAttrs uint16
	driverID                 uint32
	attrs                    []seenAttr
}

// fakeKernel records what reaches the chokepoint and answers as scripted.
type fakeKernel struct {
	ioctls   []seenIoctl
	writes   [][]byte
	ioctlErr func(object, method uint16) error
	// respond fills output attributes / the write response.
	respond func(s *seenIoctl, buf []byte)
	writeFn func(p []byte)
}

func (k *fakeKernel) Ioctl(fd int, req uint, arg []byte) error {
	if req != rdmaVerbsIoctl {
		return unix.ENOTTY
	}
	s := seenIoctl{
		object: ne.Uint16(arg[2:]), method: ne.Uint16(arg[4:]), numAttrs: ne.Uint16(arg[6:]),
		driverID: ne.Uint32(arg[16:]),
	}
	if int(ne.Uint16(arg[0:])) != len(arg) {
		return unix.EINVAL
	}
	for i := 0; i < int(s.numAttrs); i++ {
		o := ioctlHdrSize + i*ioctlAttrSize
		a := seenAttr{id: ne.Uint16(arg[o:]), len: ne.Uint16(arg[o+2:]), flags: ne.Uint16(arg[o+4:]), data: ne.Uint64(arg[o+8:])}
		if a.len > 8 {
			a.bytes = append([]byte(nil), kernel.UserMemory(a.data, int(a.len))...)
		}
		s.attrs = append(s.attrs, a)
	}
	k.ioctls = append(k.ioctls, s)
	if k.ioctlErr != nil {
		if err := k.ioctlErr(s.object, s.method); err != nil {
			return err
		}
	}
	if k.respond != nil {
		k.respond(&s, arg)
	}
	return nil
}

// Doorbell is a write to the fake.
func (k *fakeKernel) Doorbell(fd int, p []byte) (int, error) { return k.Write(fd, p) }

func (k *fakeKernel) Write(fd int, p []byte) (int, error) {
	k.writes = append(k.writes, append([]byte(nil), p...))
	if k.writeFn != nil {
		k.writeFn(p)
	}
	return len(p), nil
}
func (k *fakeKernel) Mmap(int, int64, int) ([]byte, error) { return nil, unix.ENODEV }
func (k *fakeKernel) Munmap([]byte) error                  { return nil }
func (k *fakeKernel) Close(int) error                      { return nil }

func openFake(t *testing.T, k *fakeKernel) *File {
	t.Helper()
	path := "/fake/" + t.Name()
	t.Cleanup(kernel.RegisterFake(path, func() (int, kernel.Kernel, error) { return 42, k, nil }))
	f, err := Open(path, 14)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// setOutput writes v into the output attribute id and marks it valid, as
// the kernel's uverbs_copy_to does.
func setOutput(buf []byte, id uint16, v []byte) {
	n := int(ne.Uint16(buf[6:]))
	for i := 0; i < n; i++ {
		o := ioctlHdrSize + i*ioctlAttrSize
		if ne.Uint16(buf[o:]) == id {
			copy(kernel.UserMemory(ne.Uint64(buf[o+8:]), int(ne.Uint16(buf[o+2:]))), v)
			ne.PutUint16(buf[o+4:], ne.Uint16(buf[o+4:])|attrFValidOutput)
		}
	}
}

func TestIoctlEncoding(t *testing.T) {
	k := &fakeKernel{respond: func(s *seenIoctl, buf []byte) {
		setOutput(buf, 6, []byte{7, 0, 0, 0})
		ne.PutUint64(buf[ioctlHdrSize+8:], 99) // new handle in attr 0
	}}
	f := openFake(t, k)
	big := make([]byte, 20)
	for i := range big {
		big[i] = byte(i)
	}
	var out [4]byte
	b := NewIoctl(3, 0)
	h := b.NewObject(0)
	b.Uint32In(1, 15)
	opt := b.FD(3, -1)
	b.Optional(opt)
	b.PtrIn(8, big)
	o := b.PtrOut(6, out[:])
	if err := f.Ioctl(b); err != nil {
		t.Fatal(err)
	}
	s := k.ioctls[0]
	if s.object != 3 || s.method != 0 || s.numAttrs != 5 || s.driverID != 14 {
		t.Fatalf("header = %+v", s)
	}
	if a := s.attrs[1]; a.id != 1 || a.len != 4 || a.data != 15 || a.flags != attrFMandatory {
		t.Errorf("inline u32 attr = %+v", a)
	}
	if a := s.attrs[2]; a.flags != 0 || a.data != 0xffffffff {
		t.Errorf("optional fd attr = %+v", a)
	}
	if a := s.attrs[3]; a.len != 20 || string(a.bytes) != string(big) {
		t.Errorf("pointer attr = %+v", a)
	}
	if !b.Valid(o) || out != [4]byte{7, 0, 0, 0} {
		t.Errorf("output not copied back: valid=%v out=%v", b.Valid(o), out)
	}
	if b.Result(h) != 99 {
		t.Errorf("new handle = %d, want 99", b.Result(h))
	}
	if f.Syscalls() != 1 {
		t.Errorf("syscalls = %d, want 1", f.Syscalls())
	}
}

func TestIoctlStickyErrors(t *testing.T) {
	f := openFake(t, &fakeKernel{})
	b := NewIoctl(1, 0)
	b.Uint32In(1, 1)
	b.Uint32In(1, 2)
	b.Uint32In(2, 3)
	if err := f.Ioctl(b); err == nil || f.Syscalls() != 0 {
		t.Fatalf("duplicate attribute: err=%v syscalls=%d", err, f.Syscalls())
	}
	b = NewIoctl(1, 0)
	b.PtrIn(1, make([]byte, 70000))
	if err := f.Ioctl(b); err == nil {
		t.Fatal("oversized attribute accepted")
	}
	b = NewIoctl(1, 0)
	for i := 0; i <= maxIoctlAttrs; i++ {
		b.Uint32In(uint16(i), 0)
	}
	if err := f.Ioctl(b); err == nil || f.Syscalls() != 0 {
		t.Fatalf("too many attributes: err=%v syscalls=%d", err, f.Syscalls())
	}
}

func legacyCmd() *Command {
	return &Command{Num: 3, In: make([]byte, 8), Out: make([]byte, 4), DriverIn: []byte{1, 2, 3, 4}, DriverOut: make([]byte, 8)}
}

func TestInvokeByIoctl(t *testing.T) {
	k := &fakeKernel{respond: func(s *seenIoctl, buf []byte) {
		setOutput(buf, attrWriteCoreOut, []byte{5, 0, 0, 0})
		setOutput(buf, attrUHWOut, []byte{9, 9, 9, 9, 9, 9, 9, 9})
	}}
	f := openFake(t, k)
	c := legacyCmd()
	tr, err := f.Invoke(c)
	if err != nil || tr != TransportIoctl {
		t.Fatalf("Invoke = %v, %v", tr, err)
	}
	s := k.ioctls[0]
	if s.object != objectDevice || s.method != methodInvokeWrite {
		t.Fatalf("not INVOKE_WRITE: %+v", s)
	}
	ids := map[uint16]seenAttr{}
	for _, a := range s.attrs {
		ids[a.id] = a
	}
	if ids[attrWriteCmd].data != 3 || ids[attrWriteCoreIn].len != 8 || ids[attrUHWIn].len != 4 || ids[attrUHWOut].len != 8 {
		t.Errorf("attrs = %+v", s.attrs)
	}
	if c.Out[0] != 5 || c.DriverOut[0] != 9 {
		t.Errorf("responses not copied: %v %v", c.Out, c.DriverOut)
	}
	if len(k.writes) != 0 {
		t.Error("write() used although ioctl worked")
	}
}

func TestInvokeFallsBackOnENOTTYForGood(t *testing.T) {
	k := &fakeKernel{ioctlErr: func(uint16, uint16) error { return unix.ENOTTY }}
	k.writeFn = func(p []byte) {
		resp := kernel.UserMemory(ne.Uint64(p[8:]), int(ne.Uint16(p[6:]))*4)
		copy(resp, []byte{1, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2})
	}
	f := openFake(t, k)
	for i := 0; i < 2; i++ {
		c := legacyCmd()
		tr, err := f.Invoke(c)
		if err != nil || tr != TransportWrite {
			t.Fatalf("call %d: Invoke = %v, %v", i, tr, err)
		}
		if c.Out[0] != 1 || c.DriverOut[0] != 2 {
			t.Fatalf("response split wrong: %v %v", c.Out, c.DriverOut)
		}
	}
	if len(k.ioctls) != 1 || len(k.writes) != 2 || f.Syscalls() != 3 {
		t.Fatalf("ioctls=%d writes=%d syscalls=%d; want 1, 2, 3", len(k.ioctls), len(k.writes), f.Syscalls())
	}
	w := k.writes[0]
	// header: command 3, in_words = (8 hdr + 8 core + 4 driver)/4 = 5, out_words = (4+8)/4 = 3
	if ne.Uint32(w) != 3 || ne.Uint16(w[4:]) != 5 || ne.Uint16(w[6:]) != 3 || len(w) != 20 || w[16] != 1 {
		t.Errorf("legacy framing = %v", w)
	}
	// an unrelated ioctl is refused without a syscall once ENOTTY was seen
	if err := f.Ioctl(NewIoctl(0, 2)); !errors.Is(err, ErrNoIoctl) || f.Syscalls() != 3 {
		t.Errorf("after ENOTTY: err=%v syscalls=%d", err, f.Syscalls())
	}
}

func TestEPROTONOSUPPORTIsPerMethod(t *testing.T) {
	k := &fakeKernel{ioctlErr: func(o, m uint16) error {
		if o == 0 && m == 5 {
			return unix.EPROTONOSUPPORT
		}
		return nil
	}}
	f := openFake(t, k)
	err := f.Ioctl(NewIoctl(0, 5))
	if !errors.Is(err, ErrNoIoctl) || !errors.Is(err, unix.EPROTONOSUPPORT) {
		t.Fatalf("err = %v", err)
	}
	if err := f.Ioctl(NewIoctl(0, 5)); !errors.Is(err, ErrNoIoctl) || len(k.ioctls) != 1 {
		t.Fatalf("method not remembered: err=%v ioctls=%d", err, len(k.ioctls))
	}
	if err := f.Ioctl(NewIoctl(0, 2)); err != nil {
		t.Fatalf("other method refused: %v", err)
	}
}

func TestPolicies(t *testing.T) {
	k := &fakeKernel{ioctlErr: func(uint16, uint16) error { return unix.EPROTONOSUPPORT }}
	f := openFake(t, k)
	f.SetPolicy(PolicyIoctl)
	if tr, err := f.Invoke(legacyCmd()); tr != TransportIoctl || !errors.Is(err, unix.EPROTONOSUPPORT) {
		t.Fatalf("PolicyIoctl must not fall back: %v %v", tr, err)
	}
	f.SetPolicy(PolicyWrite)
	if tr, err := f.Invoke(legacyCmd()); tr != TransportWrite || err != nil {
		t.Fatalf("PolicyWrite: %v %v", tr, err)
	}
	if len(k.ioctls) != 1 {
		t.Fatalf("PolicyWrite issued an ioctl")
	}
}

func TestExtendedFraming(t *testing.T) {
	k := &fakeKernel{ioctlErr: func(uint16, uint16) error { return unix.ENOTTY }}
	k.writeFn = func(p []byte) {
		resp := kernel.UserMemory(ne.Uint64(p[8:]), int(ne.Uint16(p[6:]))*8+int(ne.Uint16(p[18:]))*8)
		resp[0], resp[8] = 0xaa, 0xbb
	}
	f := openFake(t, k)
	c := &Command{Num: cmdFlagExtended | 1, In: make([]byte, 8), Out: make([]byte, 8), DriverOut: make([]byte, 8)}
	if _, err := f.Invoke(c); err != nil {
		t.Fatal(err)
	}
	w := k.writes[0]
	if len(w) != 8+16+8 || ne.Uint16(w[4:]) != 1 || ne.Uint16(w[6:]) != 1 || ne.Uint16(w[16:]) != 0 || ne.Uint16(w[18:]) != 1 {
		t.Errorf("extended framing = %v", w)
	}
	if c.Out[0] != 0xaa || c.DriverOut[0] != 0xbb {
		t.Errorf("extended response split: %v %v", c.Out, c.DriverOut)
	}
	bad := &Command{Num: cmdFlagExtended | 1, In: make([]byte, 4)}
	if _, err := f.Invoke(bad); err == nil {
		t.Error("misaligned extended command accepted")
	}
}

func TestLegacyCommandWithoutResponse(t *testing.T) {
	k := &fakeKernel{ioctlErr: func(uint16, uint16) error { return unix.ENOTTY }}
	f := openFake(t, k)
	// REQ_NOTIFY_CQ {cq_handle, solicited_only}: no response field to fill.
	in := []byte{7, 0, 0, 0, 1, 0, 0, 0}
	if _, err := f.Invoke(&Command{Num: 23, In: in}); err != nil {
		t.Fatal(err)
	}
	w := k.writes[0]
	if ne.Uint16(w[4:]) != 4 || ne.Uint16(w[6:]) != 0 || string(w[8:]) != string(in) {
		t.Errorf("framing of a response-less command = %v", w)
	}
}
