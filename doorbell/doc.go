// Package doorbell holds the MMIO stores and memory barriers the fast path
// needs, in Go assembly for amd64 and arm64. On other architectures
// Supported is false and the functions panic; providers that need them report
// ErrNotSupported there.
//
// Go's sync/atomic gives acquire/release ordering between goroutines, which
// is enough for queues shared with the kernel (rxe's indices, read and
// written through provider/rxe's atomic views). A device is another matter:
// its DMA sits in a wider shareability domain than the CPUs, and its doorbell
// registers are uncached or write-combining memory, which Go's memory model
// does not describe. So there is one function per barrier rdma-core uses
// (util/udma_barrier.h, util/mmio.h), named for what it orders:
//
//	ToDevice    udma_to_device_barrier    amd64: compiler barrier  arm64: DMB OSHST
//	FromDevice  udma_from_device_barrier  amd64: LFENCE            arm64: DMB OSHLD
//	FlushWC     mmio_flush_writes         amd64: SFENCE            arm64: DSB ST
//
// and the stores a doorbell needs, each a single access of its width so that
// the device never sees a torn value: Store64BE, Store32BE and Copy64 (a
// 64-byte BlueFlame chunk in ascending 8-byte stores). CopyWC64 is FlushWC,
// Copy64 and FlushWC in one call, the BlueFlame write of a one-chunk WQE.
//
// An mlx5 send doorbell, for example (ABI-NOTES §4):
//
//	doorbell.ToDevice()                                      // WQE in memory before the record
//	doorbell.Store32BE(dbrec.Pointer(4), uint32(cur)&0xffff) // send counter, dbrec[1]
//	doorbell.FlushWC()                                       // record before the MMIO write
//	doorbell.Store64BE(uar.Pointer(bfOff), ctrl)             // or Copy64 per 64 B for BlueFlame
//	doorbell.FlushWC()                                       // push the write-combining buffer out
//
// The functions take unsafe.Pointer (memory from package mmap: the pointers
// are to mappings, never to the Go heap) and are declared in *_unsafe.go files
// with explicit //go:build lines, since the project keeps package unsafe in
// files named *_unsafe.go and a name like x_amd64_unsafe.go carries no
// architecture constraint. Each is a NOSPLIT leaf in assembly that allocates
// nothing; a call to one is also a compiler barrier, as the Go compiler cannot
// move memory accesses across a call it cannot see into. The exception is
// amd64's ToDevice, which needs no instruction: it is Go, one sync/atomic
// load that inlines and that the compiler does not move memory accesses
// across (TestInlinedOrder reads the code to check it), because the call
// made every post and poll spill its registers around a bare RET.
//
// Checked here: the amd64 tests run natively; cross_test.go vets and links the
// package for arm64 and riscv64 (the fallback) and builds it for 386,
// disassembles the amd64 and arm64 binaries to check every function's
// instruction words (and amd64's ToDevice where it is inlined), and runs the arm64 and riscv64 test binaries under
// qemu-user when qemu-user-static is installed. Run by hand:
//
//	GOARCH=arm64 go vet ./doorbell
//	GOARCH=arm64 go test -c -o /tmp/doorbell.arm64 ./doorbell
//	GOVERBS_DOORBELL_NO_CROSS=1 qemu-aarch64-static /tmp/doorbell.arm64 -test.v
//	GOARCH=riscv64 go build ./doorbell
//
// QEMU executes the instructions but does not model how a device observes the
// barriers; that needs arm64 hardware with an mlx5 device.
//
// It owns the MMIO stores and barriers (Go assembly) and imports nothing of
// goverbs.
package doorbell
