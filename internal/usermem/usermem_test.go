package usermem

import (
	"bytes"
	"testing"

	"github.com/goverbs/goverbs/mmap"
)

func TestBytesViewsTheMemory(t *testing.T) {
	r, err := mmap.Anonymous(mmap.PageSize())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	copy(r.Bytes()[10:], "inline payload")
	got := Bytes(uint64(r.Addr())+10, len("inline payload"))
	if !bytes.Equal(got, []byte("inline payload")) {
		t.Fatalf("Bytes = %q", got)
	}
	got[0] = 'I'
	if r.Bytes()[10] != 'I' {
		t.Fatal("Bytes is a copy, not a view")
	}
	if Bytes(uint64(r.Addr()), 0) != nil || Bytes(uint64(r.Addr()), -1) != nil {
		t.Fatal("Bytes of n <= 0 is not nil")
	}
	if n := testing.AllocsPerRun(100, func() { _ = Bytes(uint64(r.Addr()), 8) }); n != 0 {
		t.Fatalf("Bytes allocates %.1f times per call", n)
	}
}
