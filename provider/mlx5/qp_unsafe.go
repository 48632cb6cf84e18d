package mlx5

import (
	"unsafe"

	"github.com/goverbs/goverbs/mmap"
)

// bbPtr is the address of WQEBB i (a free-running index) of the send ring,
// for the BlueFlame copy. The ring is mapped while PostSend runs (it holds
// the QP's send lock and found the QP open), so it indexes the ring's view
// directly (mmap.Region.Pointer's checks cost a post ~18 instructions).
func (s *sendQueue) bbPtr(i uint32) unsafe.Pointer {
	return unsafe.Pointer(&s.ring[int(i&(s.cnt-1))*wqeBB])
}

// bbAddr is the address of a WQEBB of the send ring, for ringOne's
// BlueFlame copy.
func bbAddr(bb *[wqeBB]byte) unsafe.Pointer { return unsafe.Pointer(bb) }

// word is the 32-bit word at byte off of m: a doorbell record's counter
// (a QP's send or receive counter, a CQ's consumer index). m stays mapped
// until the QP or CQ is closed, and a post or poll checks that first.
func word(m *mmap.Region, off int) *uint32 { return (*uint32)(m.Pointer(off)) }
