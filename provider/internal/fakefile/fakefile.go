// Package fakefile is the plumbing of the fake uverbs command files that
// the software providers' unit tests (provider/rxe, provider/siw) put in
// the kernel's place: registering and opening one, and the memory it
// hands out by mmap offset, as the kernel hands out its queues. What the
// kernel writes into that memory, and what its doorbell does, is each
// provider's own fake.
//
// It imports abi, internal/kernel and mmap; its callers are tests.
package fakefile

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/internal/kernel"
	"github.com/goverbs/goverbs/mmap"
	"golang.org/x/sys/unix"
)

var paths atomic.Int64

// Open registers k as the kernel of a fresh fake device path and opens its
// command file for the driver. The test's cleanup closes it and, if k has
// Regions (a Free method), frees them: last, after every object the test
// made later has been closed.
func Open(t testing.TB, driver uint32, k kernel.Kernel) *abi.File {
	t.Helper()
	path := fmt.Sprintf("/dev/infiniband/fake-%d-%d", driver, paths.Add(1))
	unregister := kernel.RegisterFake(path, func() (int, kernel.Kernel, error) { return 1000, k, nil })
	f, err := abi.Open(path, driver)
	if err != nil {
		unregister()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.Close()
		unregister()
		if r, ok := k.(interface{ Free() }); ok {
			r.Free()
		}
	})
	return f
}

// Regions is the memory a fake command file hands out: anonymous mappings,
// each at its own page-aligned offset (the "key" of siw, the mmap info of
// rxe). It implements the memory half of kernel.Kernel: Mmap, Munmap and
// Close.
type Regions struct {
	// MapOnce refuses a second Mmap of a region, as rxe does.
	MapOnce bool

	mu     sync.Mutex
	m      map[int64]*mmap.Region
	mapped map[int64]bool
	next   int64
}

// Add allocates size zeroed bytes and returns their offset and the
// kernel's view of them, until Free.
func (r *Regions) Add(t testing.TB, size int) (offset int64, mem []byte) {
	t.Helper()
	reg, err := mmap.Anonymous(size)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m, r.mapped, r.next = map[int64]*mmap.Region{}, map[int64]bool{}, 0x1000
	}
	offset = r.next
	r.next += int64((reg.Len() + 4095) &^ 4095)
	r.m[offset] = reg
	return offset, reg.Bytes()
}

// Free unmaps every region (Open's cleanup calls it).
func (r *Regions) Free() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, reg := range r.m {
		reg.Close()
	}
	r.m = nil
}

// Bytes is the kernel's view of the region at offset (nil if none).
func (r *Regions) Bytes(offset int64) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if reg := r.m[offset]; reg != nil {
		return reg.Bytes()
	}
	return nil
}

// Mmap maps the first length bytes of the region at offset.
func (r *Regions) Mmap(fd int, offset int64, length int) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	reg, ok := r.m[offset]
	if !ok || length > reg.Len() || r.MapOnce && r.mapped[offset] {
		return nil, unix.EINVAL
	}
	r.mapped[offset] = true
	return reg.Bytes()[:length], nil
}

// Munmap does nothing: the regions live until the test ends.
func (r *Regions) Munmap(b []byte) error { return nil }

// Close closes nothing.
func (r *Regions) Close(fd int) error { return nil }
