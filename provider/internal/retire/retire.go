// Package retire releases a queue that the kernel mapped into the process
// from the uverbs command file (rxe's queues, siw's rings) while a lock-free
// reader, a CQ's Poll, may still be reading it.
//
// Unmapping it would let that reader fault, and waiting for it would put a
// lock on the fast path. So Mapping replaces the mapping in place and at
// once by private zeroed memory (abi.File.Unshare: one mmap, the one
// syscall rdma-core's munmap costs): the kernel's memory is released now,
// and a reader in flight reads zeros (an empty queue), never unmapped
// memory. The zeroed memory is unmapped once the owner, the provider's view
// of the queue, is unreachable (runtime.AddCleanup): a reader keeps the
// owner alive (runtime.KeepAlive) for as long as it reads. A reader must
// also see, before it publishes anything, that the queue was retired
// (rxe's and siw's CQs swap their state pointer first), since what it read
// may be zeros.
//
// It owns that retirement, and imports abi only.
package retire

import (
	"fmt"
	"runtime"

	"github.com/goverbs/goverbs/abi"
)

// Mapping retires mem, a mapping of f that owner views. If the replacement
// fails, the kernel's mapping itself stays until owner is collected, and
// the error says so. mem must not be used again by the caller.
func Mapping[T any](owner *T, f *abi.File, mem []byte) error {
	var err error
	if e := f.Unshare(mem); e != nil {
		err = fmt.Errorf("replacing a retired queue's mapping by private memory: %w (the mapping stays until the queue is collected)", e)
	}
	runtime.AddCleanup(owner, func(r retired) { r.f.MunmapCleanup(r.mem) }, retired{f, mem})
	return err
}

// retired is what the cleanup unmaps: the private copy, or the file mapping
// left in place, through the command file (for the tests' fakes, which own
// the memory, it unmaps nothing).
type retired struct {
	f   *abi.File
	mem []byte
}
