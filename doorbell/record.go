package doorbell

import "math/bits"

// StoreRecord stores v most significant byte first in a doorbell-record word
// (a QP's send or receive counter, a CQ's consumer index): the same single
// 32-bit store as Store32BE, written in Go so that it inlines into a post or
// a poll. A record is host memory that the device reads by DMA, so a plain
// store serves; its order after the WQEs or CQE reads is the caller's
// ToDevice.
func StoreRecord(p *uint32, v uint32) { *p = bits.ReverseBytes32(v) }
