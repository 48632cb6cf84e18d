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

func openNop(tb testing.TB, name string) *File {
	path := "/dev/infiniband/bench-" + name
	unregister := kernel.RegisterFake(path, func() (int, kernel.Kernel, error) { return 5, nopKernel{}, nil })
	f, err := Open(path, 0)
	unregister()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	return f
}

// invokeOnce sends a MODIFY_QP-sized request with a QUERY_PORT-sized
// response and driver data both ways: the shape of most slow-path verbs.
func invokeOnce(tb testing.TB, f *File) {
	var req [112]byte
	var resp [40]byte
	var din, dout [8]byte
	if _, err := f.Invoke(&Command{Num: 3, In: req[:], Out: resp[:], DriverIn: din[:], DriverOut: dout[:]}); err != nil {
		tb.Fatal(err)
	}
}

func BenchmarkInvoke(b *testing.B) {
	for _, p := range []Policy{PolicyIoctl, PolicyWrite} {
		b.Run(map[Policy]string{PolicyIoctl: "ioctl", PolicyWrite: "write"}[p], func(b *testing.B) {
			f := openNop(b, "invoke")
			f.SetPolicy(p)
			b.ReportAllocs()
			for b.Loop() {
				invokeOnce(b, f)
			}
		})
	}
}

// ioctlOnce is a CREATE_QP-shaped builder call: handles, inline values,
// a 64-byte input, outputs read back after the call.
func ioctlOnce(tb testing.TB, f *File) {
	b := NewIoctl(1, 2)
	defer b.Release()
	var in [64]byte
	h := b.NewObject(0x10)
	b.Handle(0x11, 7)
	b.Uint32In(0x12, 9)
	b.PtrIn(0x13, in[:])
	caps := b.PtrOutLen(0x14, 20)
	num := b.PtrOutLen(0x15, 4)
	if err := f.Ioctl(b); err != nil {
		tb.Fatal(err)
	}
	_, _, _ = b.Result(h), b.Output(caps), b.Output(num)
}

func BenchmarkIoctl(b *testing.B) {
	f := openNop(b, "ioctl")
	b.ReportAllocs()
	for b.Loop() {
		ioctlOnce(b, f)
	}
}
