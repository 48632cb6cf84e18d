//go:build amd64 || arm64

// The //go:build line names the architectures with an assembly body
// (rawsyscall_amd64.s, rawsyscall_arm64.s).

package abi

import "golang.org/x/sys/unix"

// rawSyscall3 is a raw syscall of up to three arguments made by the
// instruction itself: what unix.RawSyscall does, without the three calls
// it passes through on the way (x/sys/unix's stub, package syscall's
// RawSyscall and RawSyscall6, ~40 instructions). It is the doorbell's and
// the quick commands' syscall (realKernel), where a call's every
// instruction shows: an rxe post rings one per send. Like any raw syscall
// it keeps the goroutine's P and must not block.
func rawSyscall3(trap, a1, a2, a3 uintptr) (r1 uintptr, errno unix.Errno)
