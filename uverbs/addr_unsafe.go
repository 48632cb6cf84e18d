package uverbs

import "unsafe"

// sliceAddr is the user address of b's first byte, for commands that name
// memory by address (REG_MR). The memory must not be the Go heap's moving
// stack: callers pass mappings.
func sliceAddr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
