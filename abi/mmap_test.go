package abi

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRealKernelMappings runs realKernel's raw mmap and munmap on a memfd:
// the mapping shares the file's bytes, and Munmap releases it.
func TestRealKernelMappings(t *testing.T) {
	fd, err := unix.MemfdCreate("goverbs-abi-test", 0)
	if err != nil {
		t.Skipf("memfd_create: %v", err)
	}
	defer unix.Close(fd)
	const size = 3 * 4096
	if err := unix.Ftruncate(fd, size); err != nil {
		t.Fatal(err)
	}
	var k realKernel
	m, err := k.Mmap(fd, 4096, 2*4096)
	if err != nil {
		t.Fatalf("Mmap: %v", err)
	}
	if len(m) != 2*4096 || cap(m) != 2*4096 {
		t.Fatalf("Mmap: len %d cap %d, want %d", len(m), cap(m), 2*4096)
	}
	copy(m, "goverbs")
	got := make([]byte, 7)
	if _, err := unix.Pread(fd, got, 4096); err != nil || string(got) != "goverbs" {
		t.Fatalf("file at the mapping's offset: %q, %v; want the bytes written through the mapping", got, err)
	}
	if err := k.Munmap(m); err != nil {
		t.Fatalf("Munmap: %v", err)
	}
	if err := k.Munmap(nil); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("Munmap(nil) = %v, want EINVAL", err)
	}
	if _, err := k.Mmap(-1, 0, 4096); !errors.Is(err, unix.EBADF) {
		t.Fatalf("Mmap of fd -1 = %v, want EBADF", err)
	}
}
