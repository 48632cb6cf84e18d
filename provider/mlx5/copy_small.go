package mlx5

import "encoding/binary"

// copySmall copies src (an inline WR's bytes: isPlain bounds them by a
// WQEBB) to the front of dst. From 8 bytes on it is copy without the
// runtime's memmove, whose call made the post save and reload registers
// around it (callgrind: an 8-byte inline post 408 instructions with it,
// 387 without). The 8-byte words are loads and stores of any alignment
// (one instruction each on amd64 and arm64), the last one overlapping the
// one before, so nothing outside src is read: the bytes may end at the end
// of a page. The user's bytes are taken not to overlap the send ring (rdma-core's
// mlx5 copies them with memcpy, which assumes the same). Fewer than 8 bytes go through copy:
// their own word case priced the function out of the inliner's budget,
// and the call that leaves costs more than memmove saves.
func copySmall(dst, src []byte) {
	n := len(src)
	if n < 8 {
		copy(dst, src)
		return
	}
	dst = dst[:n] // one bounds check here, none in the loop's stores
	for i := 0; i < n-8; i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(src[i:]))
	}
	binary.LittleEndian.PutUint64(dst[n-8:], binary.LittleEndian.Uint64(src[n-8:]))
}
