package abi

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// realKernel is the kernel itself: each method is one raw syscall.
type realKernel struct{}

func (realKernel) Ioctl(fd int, req uint, arg []byte) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(unsafe.Pointer(&arg[0])))
	runtime.KeepAlive(arg)
	PassScheduler()
	if e != 0 {
		return e
	}
	return nil
}

// IoctlQuick is Ioctl as a raw syscall, without entersyscall/exitsyscall,
// for commands the caller knows the kernel answers on the CPU from memory
// it has (Ioctl.Quick says which). Measured under QEMU TCG on rxe (a
// command of 10-300 µs there): around every such Syscall the runtime's
// monitor took the goroutine's P, handed it to a parked thread and woke
// itself every 20 µs while the program kept commanding, and the futex
// wake-ups, timer re-arms and clock reads that cost (in the guest kernel)
// were half of a small command's time (test/perf/slowloop.sh). A raw
// syscall keeps the P for the call's duration: nothing else runs on it,
// and a stop-the-world waits for it, so it is only for calls that cannot
// wait on a device, the network or a disk.
func (realKernel) IoctlQuick(fd int, req uint, arg []byte) error {
	_, e := rawSyscall3(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(unsafe.Pointer(&arg[0])))
	runtime.KeepAlive(arg)
	if e != 0 {
		return e
	}
	return nil
}

func (realKernel) Write(fd int, p []byte) (int, error) {
	// unix.Write would do, but a raw syscall keeps the doorbell path free of
	// the race-detector and EINTR wrappers; the uverbs file never returns EINTR.
	n, _, e := unix.Syscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	runtime.KeepAlive(p)
	PassScheduler()
	if e != 0 {
		return int(n), e
	}
	return int(n), nil
}

func (realKernel) Doorbell(fd int, p []byte) (int, error) {
	n, e := doorbellWrite(fd, p)
	runtime.KeepAlive(p)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// doorbellWrite is the doorbell's write(2) as a raw syscall: no
// entersyscall/exitsyscall. A POST_SEND write never waits for I/O, but
// under emulation or load it can outlast sysmon's 20 µs retake threshold,
// and the handoff and re-acquisition of the P then doubled rxe's
// ping-pong latency (measured: 2.0× → 1.28× of ibv_rc_pingpong's). The P
// stays held for the call's duration. Small enough to inline: File.Doorbell
// calls the syscall with no layer between (a call under TCG costs ~15 ns).
// The caller keeps p reachable until it returns (runtime.KeepAlive).
func doorbellWrite(fd int, p []byte) (uintptr, unix.Errno) {
	return rawSyscall3(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
}

// Mmap and Munmap are raw syscalls (no entersyscall/exitsyscall),
// by Ioctl.Quick's rule: mapping a queue or a doorbell page is page-table
// work the kernel does on the CPU, and a page fault can block as long.
// As ordinary syscalls they were the last ones left in creating and
// destroying a CQ on rxe once the commands were quick, and each kept the Go
// scheduler handing the goroutine's P to another thread and its monitor
// waking every 20 µs (test/perf/slowloop.sh cq under strace: per create
// and destroy ~0.8 futex, 1.7 nanosleep and 4 clock_gettime calls of the
// runtime's around 2 mmaps).
func (realKernel) Mmap(fd int, offset int64, length int) ([]byte, error) {
	p, err := rawMmap(nil, uintptr(length), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED, fd, offset)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), length), nil
}

// Munmap unmaps a mapping Mmap returned (all of it: its capacity).
func (realKernel) Munmap(b []byte) error {
	if cap(b) == 0 {
		return unix.EINVAL
	}
	return rawMunmap(unsafe.Pointer(unsafe.SliceData(b)), uintptr(cap(b)))
}

func (realKernel) Close(fd int) error { return unix.Close(fd) }

// CloseCPU is close(2) as a raw syscall, for a descriptor whose release
// the kernel does on the CPU (Ioctl.Quick's rule): the command file
// (OpenCPU) or the async event file of a software device's context.
func CloseCPU(fd int) error {
	if _, e := rawSyscall3(unix.SYS_CLOSE, uintptr(fd), 0, 0); e != 0 {
		return e
	}
	return nil
}

// rawOpen is unix.Open (openat at the working directory, with
// O_LARGEFILE as unix.Open adds it) as a raw syscall (OpenCPU).
func rawOpen(path string, flags int) (int, error) {
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return -1, err
	}
	cwd := unix.AT_FDCWD // a variable: the constant -100 is no uintptr
	fd, e := rawSyscall3(unix.SYS_OPENAT, uintptr(cwd), uintptr(unsafe.Pointer(p)), uintptr(flags|unix.O_LARGEFILE))
	runtime.KeepAlive(p)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

// Bytes views *p as its bytes, for handing a C-layout struct (the generated
// types) to the kernel. The slice aliases *p.
func Bytes[T any](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}

// addr is the user-space address of b's first byte, as the kernel wants it
// in a command's pointer fields. b must stay alive across the syscall.
func addr(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&b[0])))
}
