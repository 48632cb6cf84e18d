//go:build !amd64 && !arm64

// The //go:build line constrains this file: its name has no GOARCH element.

package abi

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawMmap is mmap(2) through x/sys/unix, which knows this architecture's
// form of the call (mmap2, or a struct): an ordinary syscall here.
func rawMmap(addr unsafe.Pointer, length uintptr, prot, flags, fd int, offset int64) (unsafe.Pointer, error) {
	return unix.MmapPtr(fd, offset, addr, length, prot, flags)
}

// rawMunmap is munmap(2) through x/sys/unix.
func rawMunmap(addr unsafe.Pointer, length uintptr) error {
	return unix.MunmapPtr(addr, length)
}
