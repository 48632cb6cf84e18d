package mlx5

import "unsafe"

// bbPtr is the address of WQEBB i (a free-running index) of the send ring,
// for the BlueFlame copy.
func (s *sendQueue) bbPtr(i uint32) unsafe.Pointer {
	return s.mem.Pointer(s.off + int(i&(s.cnt-1))*wqeBB)
}
