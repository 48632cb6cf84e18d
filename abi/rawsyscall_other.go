//go:build !amd64 && !arm64

// The //go:build line constrains this file: its name has no GOARCH element.

package abi

import "golang.org/x/sys/unix"

// rawSyscall3 is unix.RawSyscall on architectures without an assembly
// body (see rawsyscall_asm.go).
func rawSyscall3(trap, a1, a2, a3 uintptr) (uintptr, unix.Errno) {
	r, _, e := unix.RawSyscall(trap, a1, a2, a3)
	return r, e
}
