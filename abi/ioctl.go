package abi

import (
	"encoding/binary"
	"errors"
	"fmt"
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

type attrKind uint8

const (
	attrInline attrKind = iota // value in data
	attrIn                     // pointer to arena bytes the kernel reads
	attrOut                    // pointer to arena bytes the kernel writes
)

type ioctlAttr struct {
	id, len, flags uint16
	kind           attrKind
	data           uint64 // inline value, handle or fd
	off            int    // arena offset for attrIn / attrOut
	dst            []byte // where an output is copied after the call
}

// Ioctl builds one RDMA_VERBS_IOCTL call: an object, a method and its
// attributes. Attributes are mandatory unless marked Optional. Inputs of 8
// bytes or less go inline; larger ones, and every output, live in an arena
// the builder owns, so no pointer to a caller's (possibly stack) memory is
// ever handed to the kernel. The first error (too many attributes, a length
// over 65535) sticks and is returned by File.Ioctl before any syscall.
type Ioctl struct {
	object, method uint16
	attrs          []ioctlAttr
	arena          []byte
	buf            []byte // header + attrs of the last call, as the kernel left them
	err            error
}

// NewIoctl starts a call of method on object (UVERBS_OBJECT_*, UVERBS_METHOD_*).
func NewIoctl(object, method uint16) *Ioctl {
	return &Ioctl{object: object, method: method, attrs: make([]ioctlAttr, 0, 8)}
}

// Object and Method identify the call.
func (b *Ioctl) Object() uint16 { return b.object }

// Method is the method id of the call.
func (b *Ioctl) Method() uint16 { return b.method }

// Err is the builder's sticky error, if any.
func (b *Ioctl) Err() error { return b.err }

func (b *Ioctl) add(a ioctlAttr) Attr {
	if b.err != nil {
		return -1
	}
	if len(b.attrs) == maxIoctlAttrs {
		b.err = fmt.Errorf("abi: ioctl %d/%d: more than %d attributes", b.object, b.method, maxIoctlAttrs)
		return -1
	}
	for _, x := range b.attrs {
		if x.id == a.id {
			b.err = fmt.Errorf("abi: ioctl %d/%d: attribute %#x given twice", b.object, b.method, a.id)
			return -1
		}
	}
	a.flags |= attrFMandatory
	b.attrs = append(b.attrs, a)
	return Attr(len(b.attrs) - 1)
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
		return b.add(ioctlAttr{id: id, len: uint16(len(p)), kind: attrInline, data: binary.NativeEndian.Uint64(v[:])})
	}
	off := b.reserve(len(p))
	copy(b.arena[off:], p)
	return b.add(ioctlAttr{id: id, len: uint16(len(p)), kind: attrIn, off: off})
}

// PtrOut adds an output attribute (UVERBS_ATTR_PTR_OUT). After the call, if
// the kernel marked it valid, its bytes are copied into dst.
func (b *Ioctl) PtrOut(id uint16, dst []byte) Attr {
	if !b.checkLen(id, len(dst)) {
		return -1
	}
	off := b.reserve(len(dst))
	return b.add(ioctlAttr{id: id, len: uint16(len(dst)), kind: attrOut, off: off, dst: dst})
}

// Uint32In adds a 4-byte input (PTR_IN of a u32, sent inline).
func (b *Ioctl) Uint32In(id uint16, v uint32) Attr {
	return b.add(ioctlAttr{id: id, len: 4, kind: attrInline, data: uint64(v)})
}

// Uint64In adds an 8-byte input (PTR_IN of a u64, or UVERBS_ATTR_CONST_IN,
// which the kernel reads as an inline u64).
func (b *Ioctl) Uint64In(id uint16, v uint64) Attr {
	return b.add(ioctlAttr{id: id, len: 8, kind: attrInline, data: v})
}

// Handle adds an existing object (UVERBS_ATTR_IDR, by handle).
func (b *Ioctl) Handle(id uint16, handle uint32) Attr {
	return b.add(ioctlAttr{id: id, kind: attrInline, data: uint64(handle)})
}

// FD adds an existing file object (UVERBS_ATTR_FD, by descriptor).
func (b *Ioctl) FD(id uint16, fd int) Attr {
	return b.add(ioctlAttr{id: id, kind: attrInline, data: uint64(uint32(int32(fd)))})
}

// NewObject adds the attribute through which the kernel returns a new
// object's handle or file descriptor (UVERBS_ACCESS_NEW); read it with
// Result after the call.
func (b *Ioctl) NewObject(id uint16) Attr {
	return b.add(ioctlAttr{id: id, kind: attrInline})
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
	if a >= 0 && int(a) < len(b.attrs) {
		b.attrs[a].flags &^= attrFMandatory
	}
}

// Result is the data word the kernel left in attribute a: the new handle or
// file descriptor of a NewObject attribute.
func (b *Ioctl) Result(a Attr) uint64 {
	if a < 0 || b.buf == nil {
		return 0
	}
	o := ioctlHdrSize + int(a)*ioctlAttrSize
	return binary.NativeEndian.Uint64(b.buf[o+8:])
}

// Valid reports whether the kernel wrote output attribute a.
func (b *Ioctl) Valid(a Attr) bool {
	if a < 0 || b.buf == nil {
		return false
	}
	o := ioctlHdrSize + int(a)*ioctlAttrSize
	return binary.NativeEndian.Uint16(b.buf[o+4:])&attrFValidOutput != 0
}

// encode lays out the header and attributes for the kernel.
func (b *Ioctl) encode(driverID uint32) []byte {
	n := len(b.attrs)
	buf := kernelBuf(ioctlHdrSize + n*ioctlAttrSize)
	ne := binary.NativeEndian
	ne.PutUint16(buf[0:], uint16(len(buf)))
	ne.PutUint16(buf[2:], b.object)
	ne.PutUint16(buf[4:], b.method)
	ne.PutUint16(buf[6:], uint16(n))
	ne.PutUint32(buf[16:], driverID)
	for i, a := range b.attrs {
		o := ioctlHdrSize + i*ioctlAttrSize
		ne.PutUint16(buf[o:], a.id)
		ne.PutUint16(buf[o+2:], a.len)
		ne.PutUint16(buf[o+4:], a.flags)
		data := a.data
		if a.kind != attrInline {
			data = addr(b.arena[a.off:])
		}
		ne.PutUint64(buf[o+8:], data)
	}
	return buf
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
	buf := b.encode(f.driverID)
	if !f.acquire() {
		return ErrClosed
	}
	err := f.k.Ioctl(f.fd, rdmaVerbsIoctl, buf)
	f.release()
	b.buf = buf
	if err != nil {
		if f.noteIoctlError(b.object, b.method, err) {
			return fmt.Errorf("%w: %w", ErrNoIoctl, err)
		}
		return err
	}
	for i, a := range b.attrs {
		if a.kind == attrOut && b.Valid(Attr(i)) {
			copy(a.dst, b.arena[a.off:a.off+int(a.len)])
		}
	}
	return nil
}

// IsNoIoctl reports whether err means "use the write() form instead".
func IsNoIoctl(err error) bool { return errors.Is(err, ErrNoIoctl) }

// Sizes is how many bytes the call hands the kernel (header, attributes and
// inputs) and how many it lets the kernel write (outputs).
func (b *Ioctl) Sizes() (in, out int) {
	in = ioctlHdrSize + len(b.attrs)*ioctlAttrSize
	for _, a := range b.attrs {
		switch a.kind {
		case attrIn:
			in += int(a.len)
		case attrOut:
			out += int(a.len)
		}
	}
	return in, out
}
