package abi

import (
	"encoding/binary"
	"errors"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A QuickAttr is an inline attribute of a QuickIoctl: a value of Len
// bytes (at most 8: a u32, a u64, a CONST_IN, an object handle with Len
// 0) carried in the attribute itself.
type QuickAttr struct {
	ID   uint16
	Len  uint16
	Data uint64
}

// quickMaxInline is how many inline attributes a QuickIoctl carries.
const quickMaxInline = 4

// ErrNoOutput reports that the kernel answered a QuickIoctl with success
// but did not write its output attribute.
var ErrNoOutput = errors.New("abi: the kernel did not write the command's output")

// QuickIoctl runs one small ioctl method the flat way: up to four inline
// attributes and an optional output buffer (outID's PTR_OUT, out), built
// on the stack and sent as one raw syscall, with none of a builder's
// bookkeeping. It is for the cheapest commands, those the kernel answers
// on the CPU (Ioctl.Quick's rule), on the real kernel under the plain
// transport rule (PolicyAuto, no method fallen back to write).
//
// Why it exists: under emulation (QEMU TCG, where goverbs is measured
// against rdma-core) a non-inlined Go call costs ~15 ns with the register
// spills around it, ~2.5x a C call, and a memory access ~2.5 ns; the
// builder's path to a query is ~20 calls and ~550 instructions. This one
// is two calls.
//
// done reports that the call was made and err is the kernel's answer (nil,
// an errno, or ErrNoOutput). done is false, and nothing was sent, on a fake
// kernel, under another transport rule, or with more attributes than it
// takes; false too, with the syscall made, when the kernel has no such
// method (ENOTTY, EPROTONOSUPPORT): the caller then takes its general path
// (Ioctl), which asks again and records the fallback. So only methods that
// may be asked twice (queries, and commands a kernel without the method
// rejects before any effect) may use it.
func (f *File) QuickIoctl(object, method uint16, inline []QuickAttr, outID uint16, out []byte) (done bool, err error) {
	if !f.quick || f.rule.Load() != 0 || len(inline) > quickMaxInline || len(out) > 0xffff {
		return false, nil
	}
	var w struct {
		hdr   IbUverbsIoctlHdr
		attrs [quickMaxInline + 1]IbUverbsAttr
	}
	n := len(inline)
	for i := range inline {
		a := &inline[i]
		w.attrs[i] = IbUverbsAttr{AttrId: a.ID, Len: a.Len, Flags: attrFMandatory}
		binary.NativeEndian.PutUint64(w.attrs[i]._union[:], a.Data)
	}
	if out != nil {
		w.attrs[n] = IbUverbsAttr{AttrId: outID, Len: uint16(len(out)), Flags: attrFMandatory}
		n++
	}
	w.hdr = IbUverbsIoctlHdr{Length: uint16(ioctlHdrSize + n*ioctlAttrSize), ObjectId: object, MethodId: method, NumAttrs: uint16(n), DriverId: f.driverID}
	if !f.acquire() {
		return true, ErrClosed
	}
	if out != nil {
		// The address is taken here, in the last Go frame before the
		// syscall and with no call in between: out may be on the
		// caller's stack, which moves only when a function's prologue
		// grows it (the assembly below has none).
		binary.NativeEndian.PutUint64(w.attrs[n-1]._union[:], uint64(uintptr(unsafe.Pointer(unsafe.SliceData(out)))))
	}
	_, e := rawSyscall3(unix.SYS_IOCTL, uintptr(f.fd), rdmaVerbsIoctl, uintptr(unsafe.Pointer(&w)))
	runtime.KeepAlive(out)
	f.release()
	switch {
	case e == unix.ENOTTY || e == unix.EPROTONOSUPPORT:
		return false, nil
	case e != 0:
		return true, e
	case out != nil && w.attrs[n-1].Flags&attrFValidOutput == 0:
		return true, ErrNoOutput
	}
	return true, nil
}
