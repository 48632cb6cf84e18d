package mlx5

import (
	"bytes"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCopySmall copies every length an inline WR may have from the end of
// a page whose next page is inaccessible: a read past the bytes faults.
// The bytes after the copy in dst stay as they were.
func TestCopySmall(t *testing.T) {
	page := unix.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 2*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if err := unix.Mprotect(mem[page:], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	for i := range page {
		mem[i] = byte(i*7 + 3)
	}
	for n := 1; n <= wqeBB; n++ {
		src := mem[page-n : page]
		dst := bytes.Repeat([]byte{0xee}, wqeBB+8)
		copySmall(dst, src)
		if !bytes.Equal(dst[:n], src) {
			t.Fatalf("%d bytes: copied % x, want % x", n, dst[:n], src)
		}
		if rest := dst[n:]; !bytes.Equal(rest, bytes.Repeat([]byte{0xee}, len(rest))) {
			t.Fatalf("%d bytes: wrote past them: % x", n, rest)
		}
	}
}
