package uverbs

import (
	"strings"
	"testing"
)

func TestMRSGE(t *testing.T) {
	mr := &MR{length: 4096, lkey: 0x55, iova: 0x10000}
	if got, want := mr.SGE(100, 200), (SGE{Addr: 0x10000 + 100, Length: 200, LKey: 0x55}); got != want {
		t.Errorf("SGE(100, 200) = %+v, want %+v", got, want)
	}
	if got := mr.SGE(0, 4096); got.Addr != 0x10000 || got.Length != 4096 {
		t.Errorf("SGE(0, 4096) = %+v", got)
	}
	if got := mr.SGE(4096, 0); got.Addr != 0x10000+4096 || got.Length != 0 {
		t.Errorf("SGE(4096, 0) = %+v", got)
	}
	if a := mr.RemoteAddr(8); a != 0x10008 {
		t.Errorf("RemoteAddr(8) = %#x", a)
	}
	for _, r := range [][2]int{{-1, 1}, {0, 4097}, {4000, 97}, {4097, 0}, {1, -1}, {1 << 62, 1 << 62}} {
		func() {
			defer func() {
				p := recover()
				if s, _ := p.(string); !strings.Contains(s, "MR.SGE") || !strings.Contains(s, "4096-byte MR") {
					t.Errorf("SGE(%d, %d): panic %v, want one naming the MR and the range", r[0], r[1], p)
				}
			}()
			mr.SGE(r[0], r[1])
		}()
	}
	// Zero-based regions address from 0.
	zb := &MR{length: 64, lkey: 1, iova: 0}
	if got := zb.SGE(8, 8); got.Addr != 8 {
		t.Errorf("zero-based SGE(8, 8) = %+v", got)
	}
}
