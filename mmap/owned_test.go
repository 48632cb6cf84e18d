package mmap

import "testing"

// TestOwns: a Region's memory, and any part of it, is owned while the
// Region is open; a range that runs past it, Go heap memory, an empty
// slice and a closed Region's former range are not.
func TestOwns(t *testing.T) {
	a, err := Anonymous(3 * PageSize())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Anonymous(PageSize())
	if err != nil {
		t.Fatal(err)
	}
	ab, bb := a.Bytes(), b.Bytes()
	heap := make([]byte, 4096)
	for _, c := range []struct {
		name string
		b    []byte
		want bool
	}{
		{"whole region", ab, true},
		{"its middle", ab[100 : 2*PageSize()+5], true},
		{"its last byte", ab[len(ab)-1:], true},
		{"second region", bb, true},
		{"empty", ab[:0], false},
		{"heap", heap, false},
		{"nil", nil, false},
	} {
		if got := Owns(c.b); got != c.want {
			t.Errorf("Owns(%s) = %v, want %v", c.name, got, c.want)
		}
	}
	// Past the end of a: the next page is not a's (another Region's, or
	// unmapped) and the range spans two mappings.
	if start := a.Addr(); ownsRange(start, len(ab)+1) {
		t.Errorf("a range one byte past the region is owned")
	}
	bStart := b.Addr()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if ownsRange(bStart, 1) {
		t.Errorf("a closed region's range is still owned")
	}
	if !Owns(ab) {
		t.Errorf("closing b disowned a")
	}
}
