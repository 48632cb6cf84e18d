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

// loadBE32 reads the four bytes at b[0:4] (b must be 4-byte aligned) with
// one atomic 32-bit load, as a big-endian value: how the device reads a
// doorbell record word (a CQ's consumer index or arm word, a QP's or SRQ's
// counter) that the provider writes with one 32-bit store. Byte by byte
// (binary.BigEndian.Uint32 on the slice, which the race detector's
// instrumentation keeps from becoming one load) a read can land in the
// middle of a store and see half of each value: a consumer index whose low
// byte is the old one and whose next byte is the new one, up to 255 ahead
// of the truth. A PCIe read of an aligned dword is never torn.
func loadBE32(b []byte) uint32 {
	_ = b[3]
	var w [4]byte
	ne.PutUint32(w[:], atomic.LoadUint32((*uint32)(unsafe.Pointer(&b[0]))))
	return be.Uint32(w[:])
}

// loadBE64 reads the eight bytes at b[0:8] (8-byte aligned) with one atomic
// 64-bit load, as a big-endian value: how the device takes a 64-bit
// doorbell (the CQ arm register: arm word and CQ number), which reaches it
// as one 8-byte write. A byte-wise read can mix the CQ number of the new
// doorbell with bytes of the old one, naming a CQ nobody armed.
func loadBE64(b []byte) uint64 {
	_ = b[7]
	var w [8]byte
	ne.PutUint64(w[:], atomic.LoadUint64((*uint64)(unsafe.Pointer(&b[0]))))
	return be.Uint64(w[:])
}
