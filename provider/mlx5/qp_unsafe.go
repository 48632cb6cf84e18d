package mlx5

import "unsafe"

// bbPtr is the address of WQEBB i (a free-running index) of the send ring,
// for the BlueFlame copy. The ring is mapped while PostSend runs (it holds
// the QP's send lock and found the QP open), so it indexes the ring's view
// directly (mmap.Region.Pointer's checks cost a post ~18 instructions).
func (s *sendQueue) bbPtr(i uint32) unsafe.Pointer {
	return unsafe.Pointer(&s.ring[int(i&(s.cnt-1))*wqeBB])
}
