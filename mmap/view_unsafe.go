package mmap

import (
	"strconv"
	"sync/atomic"
	"unsafe"
)

// Uint32 views the four bytes at off as an atomic.Uint32: Load is a
// load-acquire and Store a store-release, as a queue index shared with the
// kernel or a device needs (rxe's producer and consumer indices). The view
// is in host byte order; it allocates nothing.
//
// off must lie inside the region and the address must be 4-byte aligned;
// otherwise, or after Close, Uint32 panics, since that is a programming
// error. The pointer is valid until Close.
func (r *Region) Uint32(off int) *atomic.Uint32 {
	return (*atomic.Uint32)(r.at(off, 4, "Uint32"))
}

// Uint64 views the eight bytes at off as an atomic.Uint64, with the
// semantics and checks of Uint32 (8-byte alignment).
func (r *Region) Uint64(off int) *atomic.Uint64 {
	return (*atomic.Uint64)(r.at(off, 8, "Uint64"))
}

// Pointer returns the address of the byte at off, for codecs and the
// doorbell stores. off must lie inside the region (0 <= off < Len());
// otherwise, or after Close, Pointer panics. The pointer is valid until
// Close.
func (r *Region) Pointer(off int) unsafe.Pointer {
	// at's check for one byte, short enough to inline into the fast paths
	// (the doorbell stores) that call Pointer.
	b := r.b
	if uint(off) >= uint(len(b)) {
		r.badAt(off, 1, "Pointer")
	}
	return unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), off)
}

// at checks that size bytes at off fit in the region and are size-aligned,
// and returns their address.
func (r *Region) at(off, size int, what string) unsafe.Pointer {
	b := r.b // nil after Close: then no off fits
	if off < 0 || off > len(b)-size || (uintptr(unsafe.Pointer(unsafe.SliceData(b)))+uintptr(off))&uintptr(size-1) != 0 {
		r.badAt(off, size, what)
	}
	return unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), off)
}

// badAt panics with the reason at refused off.
//
//go:noinline
func (r *Region) badAt(off, size int, what string) {
	b := r.b
	if b == nil {
		panic("mmap: Region." + what + " on a closed region")
	}
	if off < 0 || off > len(b)-size {
		panic("mmap: Region." + what + "(" + strconv.Itoa(off) + "): " + strconv.Itoa(size) +
			" bytes at that offset do not fit in a region of " + strconv.Itoa(len(b)) + " bytes")
	}
	panic("mmap: Region." + what + "(" + strconv.Itoa(off) + "): address is not " +
		strconv.Itoa(size) + "-byte aligned, as atomic access needs")
}
