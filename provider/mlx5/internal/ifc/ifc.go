package ifc

import "encoding/binary"

// Get reads the field of bits bits at bit offset off of the mailbox buf,
// as DEVX_GET does: the field lies within one big-endian dword, its first
// bit the dword's most significant.
func Get(buf []byte, off, bits int) uint32 {
	dw := binary.BigEndian.Uint32(buf[off/32*4:])
	shift := 32 - bits - off%32
	return dw >> shift & mask(bits)
}

// Set writes v into the field of bits bits at bit offset off of buf, as
// DEVX_SET does, leaving the dword's other bits as they are.
func Set(buf []byte, off, bits int, v uint32) {
	p := buf[off/32*4:]
	shift := 32 - bits - off%32
	dw := binary.BigEndian.Uint32(p)
	dw = dw&^(mask(bits)<<shift) | (v&mask(bits))<<shift
	binary.BigEndian.PutUint32(p, dw)
}

func mask(bits int) uint32 {
	if bits >= 32 {
		return ^uint32(0)
	}
	return 1<<bits - 1
}
