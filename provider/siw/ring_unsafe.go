package siw

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/abi"
)

// Every unsafe.Pointer of the package lives in this file: the views of the
// mapped rings as siw's C structs and the ownership words. (Inline sends
// read user memory through internal/usermem, as rxe's do.)

// Sizes and offsets in siw-abi.h, checked against the generated layouts by
// TestLayout.
const (
	sqeSize    = int(unsafe.Sizeof(abi.SiwSqe{}))    // 120
	rqeSize    = int(unsafe.Sizeof(abi.SiwRqe{}))    // 112
	cqeSize    = int(unsafe.Sizeof(abi.SiwCqe{}))    // 32
	ctrlSize   = int(unsafe.Sizeof(abi.SiwCqCtrl{})) // 8
	sgeSize    = int(unsafe.Sizeof(abi.SiwSge{}))    // 16
	offFlags   = int(unsafe.Offsetof(abi.SiwSqe{}.Flags))
	offRqFlags = int(unsafe.Offsetof(abi.SiwRqe{}.Flags))
	offCqFlags = int(unsafe.Offsetof(abi.SiwCqe{}.Flags))
	offSqeSGE  = 24      // the union of sge[SIW_MAX_SGE] and access (TestLayout)
	maxEntries = 1 << 24 // far above what siw allocates; a sanity bound
)

// ring is one of siw's mapped arrays (siw_sqe, siw_rqe or siw_cqe
// entries, a CQ's followed by its siw_cq_ctrl). Ownership travels in each
// entry's flags: SIW_WQE_VALID set means the entry belongs to the
// consumer (the kernel for SQ and RQ entries, user space for CQEs).
type ring struct {
	f    *abi.File
	mem  []byte // the mapping; nil after close
	base unsafe.Pointer
	n    uint32 // entries, a power of two
	size uintptr
}

// mapRing maps n entries of elem bytes (plus extra bytes) at the key the
// create command returned.
func mapRing(f *abi.File, what string, key uint64, n uint32, elem, extra int) (*ring, error) {
	if key == abi.SIW_INVAL_UOBJ_KEY {
		return nil, fmt.Errorf("siw: %s: the kernel returned no mapping key", what)
	}
	if n == 0 || n > maxEntries || n&(n-1) != 0 {
		return nil, fmt.Errorf("siw: %s: the kernel returned %d entries, not a power of two in [1, 2^24]", what, n)
	}
	length := int(n)*elem + extra
	mem, err := f.Mmap(int64(key), length)
	if err != nil {
		return nil, fmt.Errorf("siw: mapping the %s ({key %#x, %d bytes}) from %s: %w", what, key, length, f.Path(), err)
	}
	r, err := newRing(mem, what, n, elem, extra)
	if err != nil {
		f.Munmap(mem)
		return nil, err
	}
	r.f = f
	return r, nil
}

// newRing views mem as n entries of elem bytes followed by extra bytes
// (the tests' fakes call it directly).
func newRing(mem []byte, what string, n uint32, elem, extra int) (*ring, error) {
	if len(mem) < int(n)*elem+extra {
		return nil, fmt.Errorf("siw: %s: a mapping of %d bytes cannot hold %d entries of %d bytes", what, len(mem), n, elem)
	}
	base := unsafe.Pointer(unsafe.SliceData(mem))
	if uintptr(base)&7 != 0 {
		return nil, fmt.Errorf("siw: %s: mapping is not 8-byte aligned", what)
	}
	return &ring{mem: mem, base: base, n: n, size: uintptr(elem)}, nil
}

// entry is the address of entry i (taken modulo the ring's size).
func (r *ring) entry(i uint32) unsafe.Pointer {
	return unsafe.Add(r.base, uintptr(i&(r.n-1))*r.size)
}

// word is the 32-bit word at offset off of entry i, read and written
// atomically: the flags and the bytes that share their word.
func (r *ring) word(i uint32, off int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Add(r.entry(i), off))
}

// recvEntry is entry i of a receive ring (of siw_rqe, so the size is a
// constant) and its flags word.
func (r *ring) recvEntry(i uint32) (*abi.SiwRqe, *atomic.Uint32) {
	p := unsafe.Add(r.base, uintptr(i&(r.n-1))*uintptr(rqeSize))
	return (*abi.SiwRqe)(p), (*atomic.Uint32)(unsafe.Add(p, offRqFlags))
}

// sendEntry is entry i of a send ring (of siw_sqe, a constant size) and
// its flags word.
func (r *ring) sendEntry(i uint32) (*abi.SiwSqe, *atomic.Uint32) {
	p := unsafe.Add(r.base, uintptr(i&(r.n-1))*uintptr(sqeSize))
	return (*abi.SiwSqe)(p), (*atomic.Uint32)(unsafe.Add(p, offFlags))
}

// cqEntry is entry i of a CQ ring (of siw_cqe, a constant size) and the
// word holding its flags, opcode and status.
func (r *ring) cqEntry(i uint32) (*abi.SiwCqe, *atomic.Uint32) {
	p := unsafe.Add(r.base, uintptr(i&(r.n-1))*uintptr(cqeSize))
	return (*abi.SiwCqe)(p), (*atomic.Uint32)(unsafe.Add(p, offCqFlags))
}

func (r *ring) sqe(i uint32) *abi.SiwSqe { return (*abi.SiwSqe)(r.entry(i)) }
func (r *ring) rqe(i uint32) *abi.SiwRqe { return (*abi.SiwRqe)(r.entry(i)) }
func (r *ring) cqe(i uint32) *abi.SiwCqe { return (*abi.SiwCqe)(r.entry(i)) }

// sges is the siw_sge array of a send entry (in its union) with room for
// SIW_MAX_SGE elements.
func sqeSGEs(e *abi.SiwSqe) *[abi.SIW_MAX_SGE]abi.SiwSge {
	return (*[abi.SIW_MAX_SGE]abi.SiwSge)(unsafe.Add(unsafe.Pointer(e), offSqeSGE))
}

// sqeInline is the inline data area of a send entry: sge[1] onwards,
// SIW_MAX_INLINE bytes.
func sqeInline(e *abi.SiwSqe) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(e), offSqeSGE+sgeSize)), abi.SIW_MAX_INLINE)
}

// ctrl is the CQ's notification word, struct siw_cq_ctrl.flags, after the
// n CQEs.
func (r *ring) ctrl() *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Add(r.base, uintptr(r.n)*r.size))
}

// close unmaps the ring.
func (r *ring) close() error {
	if r == nil || r.mem == nil {
		return nil
	}
	mem := r.mem
	r.mem, r.base = nil, nil
	if r.f == nil {
		return nil
	}
	if err := r.f.Munmap(mem); err != nil {
		return fmt.Errorf("siw: unmapping a ring of %d bytes: %w", len(mem), err)
	}
	return nil
}

// flagWord is the native-endian 32-bit word holding a send or receive
// entry's flags (__u16), num_sge and opcode (__u8 each), in that order.
func flagWord(flags uint16, numSGE, opcode uint8) uint32 {
	var b [4]byte
	binary.NativeEndian.PutUint16(b[0:], flags)
	b[2], b[3] = numSGE, opcode
	return binary.NativeEndian.Uint32(b[:])
}

// wqeValid is flagWord(SIW_WQE_VALID, 0, 0): the valid bit inside a
// send or receive entry's flag word.
var wqeValid = flagWord(abi.SIW_WQE_VALID, 0, 0)

// cqeWord is the native-endian 32-bit word holding a CQE's flags, opcode
// (__u8 each) and status (__u16), in that order: cqeFields' inverse.
func cqeWord(flags, opcode uint8, status uint16) uint32 {
	var b [4]byte
	b[0], b[1] = flags, opcode
	binary.NativeEndian.PutUint16(b[2:], status)
	return binary.NativeEndian.Uint32(b[:])
}

// cqeFields splits a CQE's first word after the id: flags (__u8), opcode
// (__u8), status (__u16).
func cqeFields(w uint32) (flags, opcode uint8, status uint16) {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], w)
	return b[0], b[1], binary.NativeEndian.Uint16(b[2:])
}
