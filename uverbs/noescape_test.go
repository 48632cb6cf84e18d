package uverbs

import (
	"testing"
	"unsafe"
)

// TestNoEscapeSlices: the hidden slices are the callers' own (same
// elements, same length), and an empty or nil slice comes back empty
// without a panic.
func TestNoEscapeSlices(t *testing.T) {
	sends := make([]SendWR, 3, 8)
	if got := sendsNoEscape(sends); len(got) != 3 || &got[0] != &sends[0] {
		t.Errorf("sendsNoEscape: len %d, first at %p, want 3 at %p", len(got), unsafe.SliceData(got), &sends[0])
	}
	recvs := make([]RecvWR, 2)
	if got := recvsNoEscape(recvs); len(got) != 2 || &got[1] != &recvs[1] {
		t.Errorf("recvsNoEscape: len %d, want 2 over the same array", len(got))
	}
	var wc [4]WorkCompletion
	got := wcNoEscape(wc[:])
	got[3].ID = 7
	if len(got) != 4 || wc[3].ID != 7 {
		t.Errorf("wcNoEscape: len %d, a write through it seen as %d, want 4 and 7", len(got), wc[3].ID)
	}
	for _, empty := range [][]SendWR{nil, {}, sends[:0]} {
		if got := sendsNoEscape(empty); len(got) != 0 {
			t.Errorf("sendsNoEscape(%v) has %d elements", empty, len(got))
		}
	}
	if len(recvsNoEscape(nil)) != 0 || len(wcNoEscape(nil)) != 0 || len(wcNoEscape(wc[:0])) != 0 {
		t.Error("an empty slice came back with elements")
	}
}
