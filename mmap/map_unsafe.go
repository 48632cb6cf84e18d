package mmap

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapMem calls mmap(NULL, length, prot, flags, fd, offset) and returns the
// mapping as a slice. The slice points outside the Go heap; only unmapMem
// releases it.
func mapMem(length, prot, flags, fd int, offset int64) ([]byte, error) {
	p, err := unix.MmapPtr(fd, offset, nil, uintptr(length), prot, flags)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), length), nil
}

// mapAligned maps length bytes of anonymous memory whose address is a
// multiple of align (a power of two above the page size): it maps
// length+align bytes and unmaps the unaligned head and the tail.
func mapAligned(length, align, prot, flags int) ([]byte, error) {
	total := length + align
	if total < length {
		return nil, unix.EINVAL
	}
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(total), prot, flags)
	if err != nil {
		return nil, err
	}
	base := uintptr(p)
	start := (base + uintptr(align) - 1) &^ (uintptr(align) - 1)
	head := start - base
	tail := uintptr(total) - head - uintptr(length)
	if head > 0 {
		if err := unix.MunmapPtr(p, head); err != nil {
			unix.MunmapPtr(p, uintptr(total))
			return nil, err
		}
	}
	q := unsafe.Add(p, head)
	if tail > 0 {
		if err := unix.MunmapPtr(unsafe.Add(q, length), tail); err != nil {
			unix.MunmapPtr(q, uintptr(length)+tail)
			return nil, err
		}
	}
	return unsafe.Slice((*byte)(q), length), nil
}

// unmapMem unmaps a slice returned by mapMem or mapAligned.
func unmapMem(b []byte) error {
	return unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)))
}

// Addr returns the address of the first mapped byte, or 0 after Close: what
// a command passes to the kernel as a buffer address (a CQ's buf_addr, an
// MR's start). The memory is not on the Go heap, so the address stays valid
// until Close.
func (r *Region) Addr() uintptr {
	if r.b == nil {
		return 0
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(r.b)))
}

// Owns reports whether b lies wholly within the mapping of a Region that is
// open: memory off the Go heap that stays where it is until that Region is
// closed. uverbs' RegMR asks it to skip the pin (runtime.Pinner) and the
// bookkeeping that memory from the Go heap needs. It takes no lock: a load
// and a binary search over the open Regions.
func Owns(b []byte) bool {
	return len(b) > 0 && ownsRange(uintptr(unsafe.Pointer(unsafe.SliceData(b))), len(b))
}
