//go:build amd64 || arm64

// The //go:build line is needed: mmap(2)'s syscall takes its offset in
// bytes on these architectures (386 and arm have mmap2, s390x a struct).

package abi

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawMmap is mmap(2) as a raw syscall: no entersyscall/exitsyscall, and
// none of x/sys/unix's bookkeeping (its mmapper keeps every mapping in a
// map under a mutex). See realKernel.Mmap for why raw.
func rawMmap(addr unsafe.Pointer, length uintptr, prot, flags, fd int, offset int64) (unsafe.Pointer, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_MMAP, uintptr(addr), length, uintptr(prot), uintptr(flags), uintptr(fd), uintptr(offset))
	if e != 0 {
		return nil, e
	}
	// The mapping is outside the Go heap: the address is a pointer the
	// garbage collector ignores.
	return unsafe.Add(nil, r), nil
}

// rawMunmap is munmap(2) as a raw syscall.
func rawMunmap(addr unsafe.Pointer, length uintptr) error {
	if _, _, e := unix.RawSyscall(unix.SYS_MUNMAP, uintptr(addr), length, 0); e != 0 {
		return e
	}
	return nil
}
