package abi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sync"
)

// Sizes of the ioctl framing (rdma/rdma_user_ioctl_cmds.h: struct
// ib_uverbs_ioctl_hdr and struct ib_uverbs_attr). The layout test checks
// them against the generated C layout.
const (
	ioctlHdrSize  = 24
	ioctlAttrSize = 16
	// maxIoctlAttrs bounds one call; the kernel's own limit is the header
	// length (≤ PAGE_SIZE), far above what any method takes.
	maxIoctlAttrs = 32
	maxAttrLen    = 0xffff // struct ib_uverbs_attr.len is a u16

	// Values from rdma/rdma_user_ioctl_cmds.h and rdma/ib_user_ioctl_cmds.h.
	rdmaVerbsIoctl         = 0xC0181B01 // RDMA_VERBS_IOCTL = _IOWR(0x1b, 1, struct ib_uverbs_ioctl_hdr)
	attrFMandatory         = 1          // UVERBS_ATTR_F_MANDATORY
	attrFValidOutput       = 2          // UVERBS_ATTR_F_VALID_OUTPUT
	attrUHWIn              = 0x1000     // UVERBS_ATTR_UHW_IN
	attrUHWOut             = 0x1001     // UVERBS_ATTR_UHW_OUT
	objectDevice           = 0          // UVERBS_OBJECT_DEVICE
	methodInvokeWrite      = 0          // UVERBS_METHOD_INVOKE_WRITE
	attrWriteCoreIn        = 0          // UVERBS_ATTR_CORE_IN
	attrWriteCoreOut       = 1          // UVERBS_ATTR_CORE_OUT
	attrWriteCmd           = 2          // UVERBS_ATTR_WRITE_CMD
	cmdFlagExtended        = 0x80000000 // IB_USER_VERBS_CMD_FLAG_EXTENDED
	legacyCmdHdrSize       = 8          // struct ib_uverbs_cmd_hdr
	extendedCmdHdrSize     = 16         // struct ib_uverbs_ex_cmd_hdr
	legacyResponseFieldLen = 8          // every legacy request starts with __aligned_u64 response
)

// Attr names one attribute of an Ioctl, to read its result after the call.
type Attr int

// ioctlWire is the call as the kernel reads it: the header and the
// attribute array, written in place as attributes are added (so a call
// costs no separate encoding pass) and read back after the call for the
// kernel's answers (output flags, new handles).
type ioctlWire struct {
	hdr   IbUverbsIoctlHdr
	attrs [maxIoctlAttrs]IbUverbsAttr
}

// newIoctlWire returns an ioctlWire on the heap, where Go never moves it:
// its address goes to the kernel as an integer (see kernelBuf).
//
//go:noinline
func newIoctlWire() *ioctlWire { return new(ioctlWire) }

// Ioctl builds one RDMA_VERBS_IOCTL call: an object, a method and its
// attributes. Attributes are mandatory unless marked Optional. Inputs of 8
// bytes or less go inline; larger ones, and every output, live in an arena
// the builder owns, so no pointer to a caller's (possibly stack) memory is
// ever handed to the kernel. The first error (too many attributes, a length
// over 65535) sticks and is returned by File.Ioctl before any syscall. A
// builder makes one call: File.Ioctl refuses it a second time.
//
// Builders are recycled: NewIoctl takes one from a pool and Release gives
// it back, so a verb that releases its builder encodes its command without
// allocating. Outputs added with PtrOutLen and read with Output keep the
// caller's memory out of the builder entirely (PtrOut's dst is remembered
// by the builder, which makes the compiler move dst to the heap).
type Ioctl struct {
	object, method uint16
	n              int        // attributes added: wire.attrs[:n]
	wire           *ioctlWire // what the kernel reads, and writes back
	// offs[i] is the arena offset of attribute i's bytes when bit i of
	// arenaMask is set; encode turns it into an address (the arena may
	// move while attributes are added). outMask marks the outputs,
	// dstMask those with a dsts entry to copy into after the call.
	offs [maxIoctlAttrs]int32
	// lens[i] is the byte count reserved there: the most Output returns,
	// whatever length the kernel's answer claims.
	lens               [maxIoctlAttrs]int32
	arenaMask, outMask uint32
	dstMask            uint32
	dsts               [maxIoctlAttrs][]byte
	ids                uint64 // ids below 64 already added (the duplicate check)
	in, out            int    // bytes handed to the kernel and offered for its answers (Sizes)
	arena              []byte // reused; grown by reserve
	called             bool   // wire holds the kernel's answer to this call
	kept               bool   // a Prepared's: never goes to the pool
	encoded            bool   // a Prepared's: header and arena addresses written once, at NewPrepared
	quick              bool   // Quick: a raw syscall
	err                error
}

// maxPooledArena: a builder whose arena grew past this (a large GID table
// query) is left to the garbage collector instead of pinning it in the pool.
const maxPooledArena = 16 << 10

var ioctlPool = sync.Pool{New: func() any {
	return &Ioctl{
		wire:  newIoctlWire(),
		arena: kernelBuf(512)[:0],
	}
}}

// NewIoctl starts a call of method on object (UVERBS_OBJECT_*,
// UVERBS_METHOD_*). Call Release when done reading its results.
func NewIoctl(object, method uint16) *Ioctl {
	b := ioctlPool.Get().(*Ioctl)
	b.object, b.method = object, method
	return b
}

// Release returns b to the pool. Neither b nor any slice Output returned
// may be used afterwards. Not calling it is safe: the garbage collector
// then frees the builder. A Prepared's builder ignores it (Prepared.Done
// gives that one back).
func (b *Ioctl) Release() {
	if b.kept { // Prepared.Done's to give back
		return
	}
	if b.dstMask != 0 {
		b.dsts = [maxIoctlAttrs][]byte{} // the pool must not keep a caller's memory
	}
	b.n, b.arenaMask, b.outMask, b.dstMask, b.ids, b.in, b.out = 0, 0, 0, 0, 0, 0, 0
	b.called, b.quick, b.err = false, false, nil
	if cap(b.arena) > maxPooledArena {
		return
	}
	clear(b.arena)
	b.arena = b.arena[:0]
	ioctlPool.Put(b)
}

// Quick marks the call as one the kernel answers on the CPU: no device or
// firmware round trip, no address resolution, no page pinning or I/O, no
// wait beyond locks and the driver's own CPU-bound work on the object (a
// page fault can block as long).
// File.Ioctl then makes it a raw syscall, which spares the Go scheduler's
// hand-off of the goroutine's P around it (see realKernel.IoctlQuick) but
// holds the P, and delays a stop-the-world, for the call's duration. The
// caller, which knows the device family, decides; when unsure, do not.
func (b *Ioctl) Quick() { b.quick = true }

// Object and Method identify the call.
func (b *Ioctl) Object() uint16 { return b.object }

// Method is the method id of the call.
func (b *Ioctl) Method() uint16 { return b.method }

// Err is the builder's sticky error, if any.
func (b *Ioctl) Err() error { return b.err }

// add appends attribute id with its length, mandatory, and its data word
// (an inline value, or an arena offset when inArena), straight into the
// wire array.
func (b *Ioctl) add(id uint16, n int, data uint64) Attr {
	if b.err != nil {
		return -1
	}
	i := b.n
	if i == maxIoctlAttrs {
		b.err = fmt.Errorf("abi: ioctl %d/%d: more than %d attributes", b.object, b.method, maxIoctlAttrs)
		return -1
	}
	if id < 64 {
		if b.ids&(1<<id) != 0 {
			return b.twice(id)
		}
		b.ids |= 1 << id
	} else {
		for k := range b.wire.attrs[:i] {
			if b.wire.attrs[k].AttrId == id {
				return b.twice(id)
			}
		}
	}
	b.wire.attrs[i] = IbUverbsAttr{AttrId: id, Len: uint16(n), Flags: attrFMandatory}
	binary.NativeEndian.PutUint64(b.wire.attrs[i]._union[:], data)
	b.n = i + 1
	b.in += ioctlAttrSize
	return Attr(i)
}

func (b *Ioctl) twice(id uint16) Attr {
	b.err = fmt.Errorf("abi: ioctl %d/%d: attribute %#x given twice", b.object, b.method, id)
	return -1
}

// addArena is add for an attribute whose bytes are at arena offset off.
func (b *Ioctl) addArena(id uint16, n, off int, out bool) Attr {
	a := b.add(id, n, 0)
	if a < 0 {
		return a
	}
	b.offs[a], b.lens[a] = int32(off), int32(n)
	b.arenaMask |= 1 << a
	if out {
		b.outMask |= 1 << a
		b.out += n
	} else {
		b.in += n
	}
	return a
}

func (b *Ioctl) reserve(n int) int {
	// 8-byte alignment keeps every struct the kernel reads naturally aligned.
	off := (len(b.arena) + 7) &^ 7
	if off+n > cap(b.arena) {
		grown := kernelBuf(max(2*cap(b.arena), off+n, 256))
		copy(grown, b.arena)
		b.arena = grown[:len(b.arena)]
	}
	b.arena = b.arena[:off+n]
	return off
}

func (b *Ioctl) checkLen(id uint16, n int) bool {
	if n > maxAttrLen {
		b.err = fmt.Errorf("abi: ioctl %d/%d: attribute %#x is %d bytes, over %d", b.object, b.method, id, n, maxAttrLen)
		return false
	}
	return true
}

// PtrIn adds an input attribute (UVERBS_ATTR_PTR_IN): p is copied now.
func (b *Ioctl) PtrIn(id uint16, p []byte) Attr {
	if !b.checkLen(id, len(p)) {
		return -1
	}
	if len(p) <= 8 {
		var v [8]byte
		copy(v[:], p)
		return b.add(id, len(p), binary.NativeEndian.Uint64(v[:]))
	}
	off := b.reserve(len(p))
	copy(b.arena[off:], p)
	return b.addArena(id, len(p), off, false)
}

// PtrOut adds an output attribute (UVERBS_ATTR_PTR_OUT). After the call, if
// the kernel marked it valid, its bytes are copied into dst.
func (b *Ioctl) PtrOut(id uint16, dst []byte) Attr {
	a := b.PtrOutLen(id, len(dst))
	if a >= 0 {
		b.dsts[a] = dst
		b.dstMask |= 1 << a
	}
	return a
}

// PtrOutLen adds an output attribute of n bytes (UVERBS_ATTR_PTR_OUT) that
// stays in the builder: read it with Output after the call.
func (b *Ioctl) PtrOutLen(id uint16, n int) Attr {
	if !b.checkLen(id, n) {
		return -1
	}
	off := b.reserve(n)
	return b.addArena(id, n, off, true)
}

// Output is the kernel's answer in output attribute a, or nil if the
// kernel did not write it (Valid). The slice aliases the builder: copy
// what you keep before Release.
func (b *Ioctl) Output(a Attr) []byte {
	if !b.Valid(a) || b.outMask&(1<<a) == 0 {
		return nil
	}
	off := int(b.offs[a])
	return b.arena[off : off+min(int(b.wire.attrs[a].Len), int(b.lens[a]))]
}

// Uint32In adds a 4-byte input (PTR_IN of a u32, sent inline).
func (b *Ioctl) Uint32In(id uint16, v uint32) Attr {
	return b.add(id, 4, uint64(v))
}

// Uint64In adds an 8-byte input (PTR_IN of a u64, or UVERBS_ATTR_CONST_IN,
// which the kernel reads as an inline u64).
func (b *Ioctl) Uint64In(id uint16, v uint64) Attr {
	return b.add(id, 8, v)
}

// Handle adds an existing object (UVERBS_ATTR_IDR, by handle).
func (b *Ioctl) Handle(id uint16, handle uint32) Attr {
	return b.add(id, 0, uint64(handle))
}

// FD adds an existing file object (UVERBS_ATTR_FD, by descriptor).
func (b *Ioctl) FD(id uint16, fd int) Attr {
	return b.add(id, 0, uint64(uint32(int32(fd))))
}

// NewObject adds the attribute through which the kernel returns a new
// object's handle or file descriptor (UVERBS_ACCESS_NEW); read it with
// Result after the call.
func (b *Ioctl) NewObject(id uint16) Attr {
	return b.add(id, 0, 0)
}

// UHW adds the driver's private data (UVERBS_ATTR_UHW_IN/OUT), each only
// when non-empty, as rdma-core does.
func (b *Ioctl) UHW(in, out []byte) {
	if len(in) > 0 {
		b.PtrIn(attrUHWIn, in)
	}
	if len(out) > 0 {
		b.PtrOut(attrUHWOut, out)
	}
}

// Optional clears the mandatory flag: a kernel that does not know the
// attribute ignores it instead of failing with EPROTONOSUPPORT.
func (b *Ioctl) Optional(a Attr) {
	if a >= 0 && int(a) < b.n {
		b.wire.attrs[a].Flags &^= attrFMandatory
	}
}

// Result is the data word the kernel left in attribute a: the new handle or
// file descriptor of a NewObject attribute.
func (b *Ioctl) Result(a Attr) uint64 {
	if a < 0 || int(a) >= b.n || !b.called {
		return 0
	}
	return binary.NativeEndian.Uint64(b.wire.attrs[a]._union[:])
}

// Valid reports whether the kernel wrote output attribute a.
func (b *Ioctl) Valid(a Attr) bool {
	if a < 0 || int(a) >= b.n || !b.called {
		return false
	}
	return b.wire.attrs[a].Flags&attrFValidOutput != 0
}

// encode completes the wire form: the header, and the addresses of the
// arena attributes (known only now: the arena may have moved while
// attributes were added).
func (b *Ioctl) encode(driverID uint32) []byte {
	w := b.wire
	n := ioctlHdrSize + b.n*ioctlAttrSize
	if b.encoded {
		// A kept builder's arena no longer moves, and the kernel writes
		// no header field: only the file's driver id may be new.
		w.hdr.DriverId = driverID
		return Bytes(w)[:n]
	}
	w.hdr = IbUverbsIoctlHdr{Length: uint16(n), ObjectId: b.object, MethodId: b.method, NumAttrs: uint16(b.n), DriverId: driverID}
	for m := b.arenaMask; m != 0; m &= m - 1 {
		i := bits.TrailingZeros32(m)
		binary.NativeEndian.PutUint64(w.attrs[i]._union[:], addr(b.arena[b.offs[i]:]))
	}
	return Bytes(w)[:n]
}

// Ioctl runs b: one syscall. If the policy or an earlier answer says the
// kernel lacks this method, it returns ErrNoIoctl without a syscall; if the
// kernel answers ENOTTY or EPROTONOSUPPORT now, that is remembered for this
// file and the error wraps both ErrNoIoctl and the errno, so the caller can
// fall back to write(). Other errors are the kernel's errno.
func (f *File) Ioctl(b *Ioctl) error {
	if b.err != nil {
		return b.err
	}
	if !f.ioctlAllowed(b.object, b.method) {
		return ErrNoIoctl
	}
	return f.ioctl(b)
}

// ioctl is Ioctl once the transport rule allowed the call.
func (f *File) ioctl(b *Ioctl) error {
	if b.err != nil {
		return b.err
	}
	if b.called {
		// The kernel has written into the wire array (output flags, new
		// handles): sending it again would not be the call that was built.
		return fmt.Errorf("abi: ioctl %d/%d: builder already used; take a new one", b.object, b.method)
	}
	buf := b.encode(f.driverID)
	if !f.acquire() {
		return ErrClosed
	}
	var err error
	if b.quick && f.quick {
		// A static call, not through the Kernel interface: the quick
		// commands are the cheapest, where every call shows.
		err = realKernel{}.IoctlQuick(f.fd, rdmaVerbsIoctl, buf)
	} else {
		err = f.k.Ioctl(f.fd, rdmaVerbsIoctl, buf)
	}
	f.release()
	b.called = true
	if err != nil {
		if f.noteIoctlError(b.object, b.method, err) {
			return fmt.Errorf("%w: %w", ErrNoIoctl, err)
		}
		return err
	}
	for m := b.dstMask; m != 0; m &= m - 1 {
		a := Attr(bits.TrailingZeros32(m))
		copy(b.dsts[a], b.Output(a))
	}
	return nil
}

// IsNoIoctl reports whether err means "use the write() form instead". The
// nil test first: every successful command asks, and errors.Is is not
// inlined.
func IsNoIoctl(err error) bool { return err != nil && errors.Is(err, ErrNoIoctl) }

// Sizes is how many bytes the call hands the kernel (header, attributes and
// inputs) and how many it lets the kernel write (outputs).
func (b *Ioctl) Sizes() (in, out int) { return ioctlHdrSize + b.in, b.out }
