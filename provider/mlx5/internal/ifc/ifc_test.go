package ifc

import (
	"bytes"
	"testing"
)

// TestGetSet: fields are big-endian bit ranges within one dword, as
// DEVX_SET and DEVX_GET (rdma-core's mlx5dv.h) place them: a 16-bit
// opcode at bit 0 is the mailbox's first two bytes, a 24-bit QP number at
// bit 0x48 the low three bytes of the third dword, a 1-bit field at bit
// 0x62 the third most significant bit of the fourth dword. Set leaves the
// dword's other bits alone.
func TestGetSet(t *testing.T) {
	b := make([]byte, 16)
	Set(b, 0, 16, 0x50b)
	Set(b, 0x48, 24, 0xabcdef)
	Set(b, 0x62, 1, 1)
	want := []byte{0x05, 0x0b, 0, 0, 0, 0, 0, 0, 0x00, 0xab, 0xcd, 0xef, 0x20, 0, 0, 0}
	if !bytes.Equal(b, want) {
		t.Fatalf("mailbox % x, want % x", b, want)
	}
	b[8] = 0xff // the reserved byte before the QP number
	Set(b, 0x48, 24, 0x123456)
	if b[8] != 0xff || Get(b, 0x48, 24) != 0x123456 || Get(b, 0x40, 8) != 0xff {
		t.Errorf("after Set of the QP number: % x", b[8:12])
	}
	if Get(b, 0, 16) != 0x50b || Get(b, 0x62, 1) != 1 || Get(b, 0x61, 1) != 0 {
		t.Errorf("Get: opcode %#x, bit 0x62 %d, bit 0x61 %d", Get(b, 0, 16), Get(b, 0x62, 1), Get(b, 0x61, 1))
	}
	Set(b, 0x20, 32, 0xdeadbeef)
	if Get(b, 0x20, 32) != 0xdeadbeef {
		t.Errorf("a whole dword: %#x", Get(b, 0x20, 32))
	}
}
