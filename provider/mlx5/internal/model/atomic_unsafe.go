package model

import (
	"sync/atomic"
	"unsafe"
)

// storeWord stores the four bytes at b[0:4] (b must be 4-byte aligned) as
// one atomic 32-bit store of v in host order: how the model publishes the
// last word of a CQE (wqe_counter, signature, op_own) after the rest, as a
// device's DMA write makes the owner bit visible last.
func storeWord(b []byte, v uint32) {
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&b[0])), v)
}
