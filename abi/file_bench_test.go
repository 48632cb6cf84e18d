package abi

import (
	"testing"

	"github.com/goverbs/goverbs/internal/kernel"
)

// nopKernel answers every call at once: the benchmark measures the File's
// own cost around the syscall (counting, the descriptor's reference).
type nopKernel struct{}

func (nopKernel) Ioctl(int, uint, []byte) error         { return nil }
func (nopKernel) Write(_ int, p []byte) (int, error)    { return len(p), nil }
func (nopKernel) Doorbell(_ int, p []byte) (int, error) { return len(p), nil }
func (nopKernel) Mmap(int, int64, int) ([]byte, error)  { return nil, nil }
func (nopKernel) Munmap([]byte) error                   { return nil }
func (nopKernel) Unshare([]byte) error                  { return nil }
func (nopKernel) Close(int) error                       { return nil }

func BenchmarkDoorbell(b *testing.B) {
	path := "/dev/infiniband/bench-doorbell"
	unregister := kernel.RegisterFake(path, func() (int, kernel.Kernel, error) { return 5, nopKernel{}, nil })
	f, err := Open(path, 0)
	unregister()
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	p := make([]byte, 16)
	b.ReportAllocs()
	for b.Loop() {
		if err := f.Doorbell(p); err != nil {
			b.Fatal(err)
		}
	}
}
