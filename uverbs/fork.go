package uverbs

import (
	"sync"

	"github.com/goverbs/goverbs/abi"
)

// copyOnFork asks the kernel once per process (RDMA_NLDEV_CMD_SYS_GET)
// whether pages pinned for RDMA stay valid in a forked child; rdma-core
// asks the same before deciding on MADV_DONTFORK. Failures mean no.
var copyOnFork = sync.OnceValue(func() bool {
	t, err := dialNetlink()
	if err != nil {
		return false
	}
	defer t.close()
	msgs, err := newNLClient(t).exchange(rdmaNLGetType(abi.RDMA_NL_NLDEV, abi.RDMA_NLDEV_CMD_SYS_GET), false, nil)
	if err != nil {
		return false
	}
	for _, m := range msgs {
		attrs, err := parseNLAttrs(m.Data)
		if err != nil {
			continue
		}
		if v, err := newNLAttrSet(attrs).u8(abi.RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK); err == nil {
			return v == 1
		}
	}
	return false
})

// CopyOnFork reports whether the running kernel keeps memory registered
// for RDMA valid across fork() (Linux 5.13 and later say so). When it does,
// buffers need no MADV_DONTFORK: allocate them with
// mmap.AnonymousOpts(size, mmap.Options{CopyOnFork: uverbs.CopyOnFork()}).
// The answer is asked of the kernel once per process.
func CopyOnFork() bool { return copyOnFork() }
