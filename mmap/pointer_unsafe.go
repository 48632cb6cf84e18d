package mmap

import (
	"strconv"
	"unsafe"
)

// Pointer returns the address of the byte at off, for codecs and the
// doorbell stores. off must lie inside the region (0 <= off < Len());
// otherwise, or after Close, Pointer panics, since that is a programming
// error. The pointer is valid until Close; it allocates nothing.
func (r *Region) Pointer(off int) unsafe.Pointer {
	b := r.b
	if b == nil {
		panic("mmap: Region.Pointer on a closed region")
	}
	if off < 0 || off >= len(b) {
		panic("mmap: Region.Pointer(" + strconv.Itoa(off) + "): outside a region of " + strconv.Itoa(len(b)) + " bytes")
	}
	return unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), off)
}
