package uverbs

import (
	"runtime"
	"unsafe"
)

// sliceAddr is the user address of b's first byte, for commands that name
// memory by address (REG_MR). The memory must not be the Go heap's moving
// stack: callers pass mappings.
func sliceAddr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// stringAddr is the address of s's bytes: a verb name's identity for the
// transport record's cache (a constant's bytes never move).
func stringAddr(s string) uintptr { return uintptr(unsafe.Pointer(unsafe.StringData(s))) }

// pinSlice pins the Go object b's memory belongs to (nothing for memory
// outside the Go heap, such as a mapping). Because p keeps the pointer, b
// escapes: the compiler puts a slice passed to RegMR on the heap, never on
// a goroutine stack, which moves when it grows.
func pinSlice(p *runtime.Pinner, b []byte) { p.Pin(unsafe.SliceData(b)) }
