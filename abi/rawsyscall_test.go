package abi

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRawSyscall checks rawSyscall3's result and errno convention, and the
// real kernel's doorbell write and quick ioctl built on it, against a pipe.
func TestRawSyscall(t *testing.T) {
	if pid, e := rawSyscall3(unix.SYS_GETPID, 0, 0, 0); e != 0 || int(pid) != os.Getpid() {
		t.Fatalf("getpid: %d, %v; want %d, 0", pid, e, os.Getpid())
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	msg := []byte("doorbell")
	if n, err := (realKernel{}).Doorbell(p[1], msg); err != nil || n != len(msg) {
		t.Fatalf("Doorbell on a pipe: %d, %v; want %d, nil", n, err, len(msg))
	}
	got := make([]byte, 16)
	if n, err := unix.Read(p[0], got); err != nil || string(got[:n]) != string(msg) {
		t.Fatalf("read back %q, %v; want %q", got[:n], err, msg)
	}
	// A terminal's ioctl on a pipe: the errno comes back as the error.
	if err := (realKernel{}).IoctlQuick(p[0], unix.TCGETS, make([]byte, 64)); !errors.Is(err, unix.ENOTTY) {
		t.Fatalf("IoctlQuick on a pipe: %v; want ENOTTY", err)
	}
	unix.Close(p[1])
	if n, err := (realKernel{}).Doorbell(p[1], msg); !errors.Is(err, unix.EBADF) || n != 0 {
		t.Fatalf("Doorbell on a closed descriptor: %d, %v; want 0, EBADF", n, err)
	}
}

// TestOpenCPU checks OpenCPU's raw open(2) and close(2): the descriptor
// is open with close-on-exec and read-write, Close closes it, and a
// missing path fails as Open's does.
func TestOpenCPU(t *testing.T) {
	f, err := OpenCPU("/dev/null", 0)
	if err != nil {
		t.Fatal(err)
	}
	fd := f.Fd()
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || fl&unix.FD_CLOEXEC == 0 {
		t.Fatalf("F_GETFD on OpenCPU's descriptor: %#x, %v; want FD_CLOEXEC", fl, err)
	}
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || fl&unix.O_ACCMODE != unix.O_RDWR {
		t.Fatalf("F_GETFL on OpenCPU's descriptor: %#x, %v; want O_RDWR", fl, err)
	}
	if err := f.Write([]byte{1, 2, 3, 4}); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
		t.Fatalf("F_GETFD after Close: %v; want EBADF", err)
	}
	var pe *os.PathError
	if _, err := OpenCPU("/dev/no-such-uverbs", 0); !errors.As(err, &pe) || !errors.Is(err, unix.ENOENT) || pe.Path != "/dev/no-such-uverbs" {
		t.Fatalf("OpenCPU of a missing path: %v; want a PathError wrapping ENOENT", err)
	}
	if err := CloseCPU(fd); !errors.Is(err, unix.EBADF) {
		t.Fatalf("CloseCPU of a closed descriptor: %v; want EBADF", err)
	}
}
