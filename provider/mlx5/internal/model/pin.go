package model

import (
	"fmt"

	"github.com/goverbs/goverbs/internal/kernel"
	"github.com/goverbs/goverbs/mmap"
	"golang.org/x/sys/unix"
)

// pin is user memory the modelled kernel pinned for the device (a CQ, QP or
// SRQ buffer and its doorbell record), as ib_umem_get pins it: the process
// may unmap its view (a provider releasing its rings before the kernel
// destroyed the object, as on a context close), and the device still reads
// and writes the same pages until the kernel releases them. The model gets
// that by moving the pages into a memfd: the user's range is replaced, in
// place and with the same bytes, by a shared mapping of it, and the model
// keeps a second mapping of its own, unmapped by release.
type pin struct {
	start uint64 // page-aligned user address
	alias []byte // the model's mapping of the pages
}

// pinRange pins the pages holding [addr, addr+n) and returns the pin.
// It runs while the process is inside the create command for the object
// that owns the range, so nothing writes the range meanwhile.
func pinRange(addr uint64, n int) (*pin, error) {
	ps := uint64(mmap.PageSize())
	start := addr &^ (ps - 1)
	end := (addr + uint64(n) + ps - 1) &^ (ps - 1)
	size := int(end - start)
	fd, err := unix.MemfdCreate("goverbs-mlx5-model-pin", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("model: pinning user memory: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return nil, fmt.Errorf("model: pinning user memory: %w", err)
	}
	alias, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("model: pinning user memory: %w", err)
	}
	copy(alias, kernel.UserMemory(start, size))
	// Replace the user's pages by the shared ones at the same address.
	_, _, e := unix.Syscall6(unix.SYS_MMAP, uintptr(start), uintptr(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_SHARED|unix.MAP_FIXED, uintptr(fd), 0)
	if e != 0 {
		unix.Munmap(alias)
		return nil, fmt.Errorf("model: pinning user memory: %w", e)
	}
	return &pin{start: start, alias: alias}, nil
}

// view is the model's view of n bytes at user address addr, inside the pin.
func (p *pin) view(addr uint64, n int) []byte {
	off := int(addr - p.start)
	return p.alias[off : off+n : off+n]
}

func (p *pin) release() {
	if p.alias != nil {
		unix.Munmap(p.alias)
		p.alias = nil
	}
}

// pinSet pins several user ranges of one object: ranges whose pages overlap
// or touch share one pin (a page must be moved once).
type pinSet []*pin

// pinRanges pins the ranges {addr, n} and returns their views in order.
func pinRanges(rs ...[2]uint64) (pinSet, [][]byte, error) {
	ps := uint64(mmap.PageSize())
	lo, hi := ^uint64(0), uint64(0)
	for _, r := range rs {
		lo = min(lo, r[0]&^(ps-1))
		hi = max(hi, (r[0]+r[1]+ps-1)&^(ps-1))
	}
	// The provider lays out each object in one region; a spread-out set
	// (another provider's layout) is pinned range by range.
	var set pinSet
	views := make([][]byte, len(rs))
	total := uint64(0)
	for _, r := range rs {
		total += (r[0]+r[1]+ps-1)&^(ps-1) - r[0]&^(ps-1)
	}
	if hi-lo <= total {
		p, err := pinRange(lo, int(hi-lo))
		if err != nil {
			return nil, nil, err
		}
		set = pinSet{p}
		for i, r := range rs {
			views[i] = p.view(r[0], int(r[1]))
		}
		return set, views, nil
	}
	for i, r := range rs {
		p, err := pinRange(r[0], int(r[1]))
		if err != nil {
			set.release()
			return nil, nil, err
		}
		set = append(set, p)
		views[i] = p.view(r[0], int(r[1]))
	}
	return set, views, nil
}

func (s pinSet) release() {
	for _, p := range s {
		p.release()
	}
}
