package main

import (
	"sync/atomic"
	"unsafe"
)

// loadByte reads b[i] with an atomic load of the aligned 32-bit word that
// holds it, so a spinning loop sees the peer's RDMA write land (a plain
// load could be hoisted out of the loop). b must be 4-byte aligned at 0
// and long enough for the word; mmap'd buffers are page aligned.
func loadByte(b []byte, i int) byte {
	w := atomic.LoadUint32((*uint32)(unsafe.Pointer(&b[i&^3])))
	k := i & 3
	if !littleEndian {
		k = 3 - k
	}
	return byte(w >> (8 * k))
}

// littleEndian: byte 0 of a word is its low byte.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// loadUint32 reads the aligned native-endian 32-bit word at b[i] with an
// atomic load, so a spinning loop sees the peer's RDMA write land.
func loadUint32(b []byte, i int) uint32 {
	_ = b[i+3]
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&b[i])))
}
