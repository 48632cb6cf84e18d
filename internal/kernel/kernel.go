// Package kernel is the seam at goverbs' syscall chokepoint: the set of
// operations a uverbs command file performs, so that a test double (the mlx5
// device model) can play the kernel's side for a device path. It is internal
// to the module on purpose: programs always talk to the real kernel, and no
// exported API offers a way to swap it.
//
// It is the bottom of the tree: it imports nothing of goverbs, and abi is
// its only user outside tests.
package kernel

import (
	"fmt"
	"sync"
)

// Kernel is what an abi.File talks to. The real implementation issues
// syscalls on fd; a fake interprets the same bytes. Every method is exactly
// one syscall on the real kernel.
type Kernel interface {
	// Ioctl performs ioctl(fd, req, &arg[0]). The kernel may write into arg
	// (new handles, output flags) and through the pointers it contains.
	Ioctl(fd int, req uint, arg []byte) error
	// Write performs write(fd, p).
	Write(fd int, p []byte) (int, error)
	// Doorbell performs write(fd, p) for a fast-path doorbell (rxe's
	// POST_SEND), a write that never blocks. The real kernel makes it a
	// raw syscall, without telling the Go scheduler: a doorbell that runs
	// long (rxe runs its requester inside it) then costs no handoff of the
	// goroutine's P to another thread and back.
	Doorbell(fd int, p []byte) (int, error)
	// Mmap maps length bytes of fd at offset, shared and read-write.
	Mmap(fd int, offset int64, length int) ([]byte, error)
	// Munmap releases a mapping returned by Mmap.
	Munmap(b []byte) error
	// Close closes fd.
	Close(fd int) error
}

// Opener opens a device path on a fake kernel and returns the file
// descriptor number the fake will recognise.
type Opener func() (fd int, k Kernel, err error)

var fakes sync.Map // device path → Opener

// RegisterFake makes abi.Open(path) use open instead of the real kernel until
// the returned function is called. Two registrations of one path are a
// programming error.
func RegisterFake(path string, open Opener) (unregister func()) {
	if _, loaded := fakes.LoadOrStore(path, open); loaded {
		panic(fmt.Sprintf("kernel: fake already registered for %s", path))
	}
	return func() { fakes.Delete(path) }
}

// LookupFake returns the fake registered for path, if any.
func LookupFake(path string) (Opener, bool) {
	v, ok := fakes.Load(path)
	if !ok {
		return nil, false
	}
	return v.(Opener), true
}
