package fakefile

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/abi"
	"golang.org/x/sys/unix"
)

type fake struct{ Regions }

func (*fake) Ioctl(int, uint, []byte) error     { return unix.ENOTTY }
func (*fake) Write(int, []byte) (int, error)    { return 0, unix.EINVAL }
func (*fake) Doorbell(int, []byte) (int, error) { return 0, unix.EINVAL }

// TestRegions: a region is mapped through the command file at its offset,
// once with MapOnce; unknown offsets and oversized lengths are refused.
func TestRegions(t *testing.T) {
	k := &fake{Regions{MapOnce: true}}
	f := Open(t, abi.RDMA_DRIVER_SIW, k)
	off, mem := k.Add(t, 100)
	off2, _ := k.Add(t, 5000)
	if off%4096 != 0 || off2 <= off || off2%4096 != 0 {
		t.Fatalf("offsets %#x and %#x: want distinct, page-aligned", off, off2)
	}
	mem[3] = 7
	b, err := f.Mmap(off, 100)
	if err != nil || len(b) != 100 || b[3] != 7 {
		t.Fatalf("Mmap = %d bytes, %v", len(b), err)
	}
	if _, err := f.Mmap(off, 100); !errors.Is(err, unix.EINVAL) {
		t.Errorf("second Mmap with MapOnce: %v, want EINVAL", err)
	}
	if _, err := f.Mmap(off2, 1<<20); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Mmap past the region: %v, want EINVAL", err)
	}
	if _, err := f.Mmap(0x123000, 8); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Mmap of no region: %v, want EINVAL", err)
	}
}
