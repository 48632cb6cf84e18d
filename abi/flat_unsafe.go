package abi

import (
	"encoding/binary"
	"errors"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A FlatAttr is an inline attribute of a FlatIoctl: a value of Len
// bytes (at most 8: a u32, a u64, a CONST_IN, an object handle with Len
// 0) carried in the attribute itself.
type FlatAttr struct {
	ID   uint16
	Len  uint16
	Data uint64
}

// flatMaxInline is how many inline attributes a FlatIoctl carries.
const flatMaxInline = 4

// ErrNoOutput reports that the kernel answered a FlatIoctl with success
// but did not write its output attribute.
var ErrNoOutput = errors.New("abi: the kernel did not write the command's output")

// FlatIoctl runs one small ioctl method the flat way: up to four inline
// attributes and an optional output buffer (outID's PTR_OUT, out), built
// on the stack and sent as one syscall (a raw one if quick, by
// Ioctl.Quick's rule), with none of a builder's bookkeeping. It serves the
// one-attribute destroys and the GID query on the real kernel under the
// plain transport rule (PolicyAuto, no method fallen back to write).
//
// Why it exists: under emulation (QEMU TCG, where goverbs is measured
// against rdma-core) a non-inlined Go call costs ~15 ns with the register
// spills around it (a C call ~7 ns) and a memory access ~2.5 ns, and the
// builder's path to a query was ~20 calls and ~550 instructions; flat,
// QueryGID went from 4.61 to 4.12 µs a call on rxe0 (rdma-core: 3.79).
//
// done reports that the call was made and err is the kernel's answer (nil,
// an errno, or ErrNoOutput). done is false, and nothing was sent, on a fake
// kernel, under another transport rule, or with more attributes than it
// takes; false too, with the syscall made, when the kernel has no such
// method (ENOTTY, EPROTONOSUPPORT): the caller then takes its general path
// (Ioctl), which asks again and records the fallback. So only methods that
// may be asked twice (queries, and commands a kernel without the method
// rejects before any effect) may use it.
func (f *File) FlatIoctl(object, method uint16, quick bool, inline []FlatAttr, outID uint16, out []byte) (done bool, err error) {
	if !f.quick || f.rule.Load() != 0 || len(inline) > flatMaxInline || len(out) > 0xffff {
		return false, nil
	}
	var w struct {
		hdr   IbUverbsIoctlHdr
		attrs [flatMaxInline + 1]IbUverbsAttr
	}
	n := len(inline)
	for i := range inline {
		a := &inline[i]
		w.attrs[i] = IbUverbsAttr{AttrId: a.ID, Len: a.Len, Flags: attrFMandatory}
		binary.NativeEndian.PutUint64(w.attrs[i]._union[:], a.Data)
	}
	if len(out) > 0 {
		w.attrs[n] = IbUverbsAttr{AttrId: outID, Len: uint16(len(out)), Flags: attrFMandatory}
		n++
	}
	w.hdr = IbUverbsIoctlHdr{Length: uint16(ioctlHdrSize + n*ioctlAttrSize), ObjectId: object, MethodId: method, NumAttrs: uint16(n), DriverId: f.driverID}
	if !f.acquire() {
		return true, ErrClosed
	}
	if len(out) > 0 {
		// The address is taken here, with nothing but nosplit code
		// between it and the syscall: out may be on the caller's
		// stack, which moves only when a function's prologue grows it.
		binary.NativeEndian.PutUint64(w.attrs[n-1]._union[:], uint64(uintptr(unsafe.Pointer(unsafe.SliceData(out)))))
	}
	e := f.flatSyscall(quick, unsafe.Pointer(&w))
	runtime.KeepAlive(out)
	f.release()
	if !quick {
		PassScheduler()
	}
	switch {
	case e == unix.ENOTTY || e == unix.EPROTONOSUPPORT:
		return false, nil
	case e != 0:
		return true, e
	case len(out) > 0 && w.attrs[n-1].Flags&attrFValidOutput == 0:
		return true, ErrNoOutput
	}
	return true, nil
}

// A FlatBuf is a buffer attribute of a FlatMethod, named where it is: an
// input (PTR_IN; at most 8 bytes go inline, as the builder sends them) or
// an output (PTR_OUT) the kernel writes in place.
type FlatBuf struct {
	ID  uint16
	Out bool
	// Optional sends the attribute without UVERBS_ATTR_F_MANDATORY (as
	// Ioctl.Optional): a kernel that does not know it ignores it.
	Optional bool
	B        []byte
}

// FlatUHW puts the driver's private data (UVERBS_ATTR_UHW_IN and _OUT) in
// bufs from index n, each only when not empty, as Ioctl.UHW adds them, and
// returns the new count.
func FlatUHW(bufs []FlatBuf, n int, in, out []byte) int {
	if len(in) > 0 {
		bufs[n] = FlatBuf{ID: attrUHWIn, B: in}
		n++
	}
	if len(out) > 0 {
		bufs[n] = FlatBuf{ID: attrUHWOut, Out: true, B: out}
		n++
	}
	return n
}

// flatMaxAttrs is how many attributes a FlatMethod carries (a QP_CREATE
// has up to 13).
const flatMaxAttrs = 16

// FlatMethod is FlatIoctl for a method of more attributes, as a create
// has: up to sixteen in all, the inline ones and the buffers. After the
// call each inline attribute's Data is what the kernel left there (a new
// object's handle, for an attribute of UVERBS_ACCESS_NEW), and bit i of
// valid is set when the kernel wrote output bufs[i]. It declines, and
// may be asked again, as FlatIoctl does; a method that creates an object
// does so only on success, so a kernel's refusal with ENOTTY or
// EPROTONOSUPPORT left nothing to undo.
//
// FlatIoctl stays a copy of its small case: made a wrapper of this one (a
// call more and a 16-attribute wire to clear), it made query_gid 7-8% and
// query_port 3-4% slower under emulation in a same-boot A/B (session 37).
func (f *File) FlatMethod(object, method uint16, quick bool, inline []FlatAttr, bufs []FlatBuf) (done bool, valid uint32, err error) {
	if !f.quick || f.rule.Load() != 0 || len(inline)+len(bufs) > flatMaxAttrs {
		return false, 0, nil
	}
	var w struct {
		hdr   IbUverbsIoctlHdr
		attrs [flatMaxAttrs]IbUverbsAttr
	}
	n := len(inline)
	for i := range inline {
		a := &inline[i]
		w.attrs[i] = IbUverbsAttr{AttrId: a.ID, Len: a.Len, Flags: attrFMandatory}
		binary.NativeEndian.PutUint64(w.attrs[i]._union[:], a.Data)
	}
	for i := range bufs {
		if len(bufs[i].B) > 0xffff {
			return false, 0, nil // the builder refuses it with its error
		}
		w.attrs[n+i] = IbUverbsAttr{AttrId: bufs[i].ID, Len: uint16(len(bufs[i].B)), Flags: attrFMandatory}
		if bufs[i].Optional {
			w.attrs[n+i].Flags = 0
		}
	}
	total := n + len(bufs)
	w.hdr = IbUverbsIoctlHdr{Length: uint16(ioctlHdrSize + total*ioctlAttrSize), ObjectId: object, MethodId: method, NumAttrs: uint16(total), DriverId: f.driverID}
	if !f.acquire() {
		return true, 0, ErrClosed
	}
	// The buffers' addresses, taken here for FlatIoctl's reason: nothing
	// between them and the syscall may grow the stack.
	for i := range bufs {
		if bufs[i].Out {
			flatOut(&w.attrs[n+i], bufs[i].B)
		} else {
			flatIn(&w.attrs[n+i], bufs[i].B)
		}
	}
	e := f.flatSyscall(quick, unsafe.Pointer(&w))
	runtime.KeepAlive(bufs)
	f.release()
	if !quick {
		PassScheduler()
	}
	switch {
	case e == unix.ENOTTY || e == unix.EPROTONOSUPPORT:
		return false, 0, nil
	case e != 0:
		return true, 0, e
	}
	for i := range inline {
		inline[i].Data = binary.NativeEndian.Uint64(w.attrs[i]._union[:])
	}
	for i := range bufs {
		if bufs[i].Out && w.attrs[n+i].Flags&attrFValidOutput != 0 {
			valid |= 1 << i
		}
	}
	return true, valid, nil
}

// flatSyscall sends the wire at w: a raw syscall if quick, else an
// ordinary one. It is nosplit, as everything between a flat call's
// taking of its buffers' addresses and the kernel must be (see
// FlatIoctl): its frame cannot grow the stack under them.
//
//go:nosplit
func (f *File) flatSyscall(quick bool, w unsafe.Pointer) unix.Errno {
	if quick {
		_, e := rawSyscall3(unix.SYS_IOCTL, uintptr(f.fd), rdmaVerbsIoctl, uintptr(w))
		return e
	}
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(f.fd), rdmaVerbsIoctl, uintptr(w))
	return e
}

// flatInvoke sends c through DEVICE/INVOKE_WRITE the flat way, as
// FlatIoctl sends a method: at most five attributes on the stack, the
// request and response buffers named where they are (no copies), one
// syscall (raw if c.Quick). The caller has checked that the file is the
// real kernel under the plain rule. done is false, with the syscall made,
// only when the kernel has no INVOKE_WRITE or not for this command
// (ENOTTY, EPROTONOSUPPORT): Invoke then takes its general path, which
// records that and falls back to write(); the command had no effect.
func (f *File) flatInvoke(c *Command) (done bool, err error) {
	if len(c.In) > 0xffff || len(c.Out) > 0xffff || len(c.DriverIn) > 0xffff || len(c.DriverOut) > 0xffff {
		return false, nil // the general path refuses it with its error
	}
	var w struct {
		hdr   IbUverbsIoctlHdr
		attrs [5]IbUverbsAttr
	}
	w.attrs[0] = IbUverbsAttr{AttrId: attrWriteCoreIn, Len: uint16(len(c.In)), Flags: attrFMandatory}
	w.attrs[1] = IbUverbsAttr{AttrId: attrWriteCmd, Len: 8, Flags: attrFMandatory}
	binary.NativeEndian.PutUint64(w.attrs[1]._union[:], uint64(c.Num))
	n := 2
	out, din, dout := -1, -1, -1
	if len(c.Out) > 0 {
		w.attrs[n] = IbUverbsAttr{AttrId: attrWriteCoreOut, Len: uint16(len(c.Out)), Flags: attrFMandatory}
		out, n = n, n+1
	}
	if len(c.DriverIn) > 0 {
		w.attrs[n] = IbUverbsAttr{AttrId: attrUHWIn, Len: uint16(len(c.DriverIn)), Flags: attrFMandatory}
		din, n = n, n+1
	}
	if len(c.DriverOut) > 0 {
		w.attrs[n] = IbUverbsAttr{AttrId: attrUHWOut, Len: uint16(len(c.DriverOut)), Flags: attrFMandatory}
		dout, n = n, n+1
	}
	w.hdr = IbUverbsIoctlHdr{Length: uint16(ioctlHdrSize + n*ioctlAttrSize), ObjectId: objectDevice, MethodId: methodInvokeWrite, NumAttrs: uint16(n), DriverId: f.driverID}
	if !f.acquire() {
		return true, ErrClosed
	}
	// The buffers' addresses, taken here for FlatIoctl's reason: nothing
	// between them and the syscall may grow the stack (flatIn, flatOut
	// and flatSyscall are nosplit, and so is the runtime's memmove).
	flatIn(&w.attrs[0], c.In)
	if out >= 0 {
		flatOut(&w.attrs[out], c.Out)
	}
	if din >= 0 {
		flatIn(&w.attrs[din], c.DriverIn)
	}
	if dout >= 0 {
		flatOut(&w.attrs[dout], c.DriverOut)
	}
	e := f.flatSyscall(c.Quick, unsafe.Pointer(&w))
	runtime.KeepAlive(c)
	f.release()
	if !c.Quick {
		PassScheduler()
	}
	switch {
	case e == unix.ENOTTY || e == unix.EPROTONOSUPPORT:
		return false, nil
	case e != 0:
		return true, e
	}
	return true, nil
}

// flatIn sets an input attribute's data: at most 8 bytes inline (the
// kernel reads such an attribute's bytes from data itself, as PtrIn sends
// them), a longer buffer by its address. flatOut sets an output's address.
//
//go:nosplit
func flatIn(a *IbUverbsAttr, p []byte) {
	if len(p) <= 8 {
		copy(a._union[:], p)
		return
	}
	flatOut(a, p)
}

//go:nosplit
func flatOut(a *IbUverbsAttr, p []byte) {
	binary.NativeEndian.PutUint64(a._union[:], uint64(uintptr(unsafe.Pointer(unsafe.SliceData(p)))))
}
