package mmap

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Options tune Anonymous. The zero value is what device-visible memory
// normally wants: small pages, MADV_DONTFORK applied.
type Options struct {
	// CopyOnFork says the kernel copies pinned pages into a child at fork
	// (netlink's RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK is 1), so the mapping may
	// stay inheritable and MADV_DONTFORK is skipped. Leave it false unless
	// the kernel reported it: without that guarantee a fork can move a parent
	// page under a device that still writes to the old one.
	CopyOnFork bool

	// HugePages rounds the size up to the transparent huge page size
	// (usually 2 MiB), aligns the mapping to it and asks for huge pages with
	// MADV_HUGEPAGE. It is advice: the kernel may still use small pages
	// (transparent_hugepage "never", no free huge pages).
	HugePages bool
}

// Region owns one memory mapping, released by Close. Its accessors must not
// race with Close (memory used after munmap faults), but Close itself may be
// called any number of times from any goroutine: the mapping is unmapped
// exactly once.
type Region struct {
	mu   sync.Mutex
	b    []byte // the mapping, nil once closed
	size int    // bytes mapped (and unmapped by Close)
}

// PageSize returns the system page size in bytes.
func PageSize() int { return os.Getpagesize() }

// Anonymous maps size bytes (rounded up to a page) of private, zeroed,
// read-write memory off the Go heap, prefaulted and marked MADV_DONTFORK, as
// queues and registered buffers need. It is AnonymousOpts with zero Options.
func Anonymous(size int) (*Region, error) {
	return AnonymousOpts(size, Options{})
}

// AnonymousOpts is Anonymous with Options. The memory is MAP_PRIVATE |
// MAP_ANONYMOUS, readable and writable, and every page has been touched, so
// the fast path takes no first-touch faults; fresh anonymous pages read as
// zero.
func AnonymousOpts(size int, o Options) (*Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("mmap: anonymous mapping of %d bytes: %w", size, unix.EINVAL)
	}
	align := PageSize()
	if o.HugePages {
		align = hugePageSize()
	}
	n, ok := roundUp(size, align)
	if !ok {
		return nil, fmt.Errorf("mmap: anonymous mapping of %d bytes: size overflows: %w", size, unix.EINVAL)
	}
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	var b []byte
	var err error
	if o.HugePages {
		b, err = mapAligned(n, align, unix.PROT_READ|unix.PROT_WRITE, flags)
	} else {
		// MAP_POPULATE faults every page in with one syscall.
		b, err = mapMem(n, unix.PROT_READ|unix.PROT_WRITE, flags|unix.MAP_POPULATE, -1, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("mmap: anonymous mapping of %d bytes: %w", n, err)
	}
	r := &Region{b: b, size: n}
	own(r.Addr(), n)
	if !o.CopyOnFork {
		if err := unix.Madvise(b, unix.MADV_DONTFORK); err != nil {
			r.Close()
			return nil, fmt.Errorf("mmap: madvise(MADV_DONTFORK) on %d bytes: %w", n, err)
		}
	}
	if o.HugePages {
		// Advice only: EINVAL means no transparent huge page support.
		if err := unix.Madvise(b, unix.MADV_HUGEPAGE); err != nil && !errors.Is(err, unix.EINVAL) {
			r.Close()
			return nil, fmt.Errorf("mmap: madvise(MADV_HUGEPAGE) on %d bytes: %w", n, err)
		}
		// Touch each small page after the advice, so the faults can be
		// served with huge pages.
		for i, p := 0, PageSize(); i < len(b); i += p {
			b[i] = 0
		}
	}
	return r, nil
}

// Bytes returns the mapped memory, or nil after Close. Memory a device
// writes should be read through the atomic views (Uint32, Uint64) or after
// the barrier the device's protocol asks for, not through plain loads alone.
func (r *Region) Bytes() []byte { return r.b }

// Len returns the length of the mapping in bytes, or 0 after Close.
func (r *Region) Len() int { return len(r.b) }

// Close unmaps the memory. Later calls return nil and do nothing.
func (r *Region) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.b == nil {
		return nil
	}
	b := r.b
	disown(r.Addr()) // before the unmap: the range may be mapped again at once
	r.b = nil
	if err := unmapMem(b); err != nil {
		return fmt.Errorf("mmap: munmap of %d bytes: %w", r.size, err)
	}
	return nil
}

func roundUp(n, align int) (int, bool) {
	m := (n + align - 1) &^ (align - 1)
	return m, m >= n
}

var hugePageSize = sync.OnceValue(func() int {
	const fallback = 2 << 20
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
	if err != nil {
		return fallback
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < PageSize() || n&(n-1) != 0 {
		return fallback
	}
	return n
})
