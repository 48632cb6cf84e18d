package rxe

import (
	"net"
	"testing"
)

// TestIsV4Mapped checks the word-load test against net.IP's reading of
// the same 16 bytes, for mapped addresses and for GIDs that differ from
// one in a single byte of the prefix.
func TestIsV4Mapped(t *testing.T) {
	mapped := [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 0, 14: 2, 15: 15}
	gids := [][16]byte{mapped, {0: 0xfe, 1: 0x80, 15: 1}, {}, {10: 0xff, 11: 0xff}}
	for i := range 12 {
		for _, v := range []byte{0x01, 0x80, 0xfe} {
			g := mapped
			g[i] ^= v
			gids = append(gids, g)
		}
	}
	for _, g := range gids {
		want := net.IP(g[:]).To4() != nil
		if got := isV4Mapped(g); got != want {
			t.Errorf("isV4Mapped(%v) = %v, want %v", net.IP(g[:]), got, want)
		}
	}
}
