package abi

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/internal/kernel"
	"golang.org/x/sys/unix"
)

// Transport says how a command reached the kernel.
type Transport uint8

const (
	// TransportNone: no syscall at all (fast-path work in shared memory).
	TransportNone Transport = iota
	// TransportIoctl: RDMA_VERBS_IOCTL, including write commands tunnelled
	// through DEVICE/INVOKE_WRITE.
	TransportIoctl
	// TransportWrite: a write() of a framed command on the command file.
	TransportWrite
)

// String is the transport's name, as errors print it.
func (t Transport) String() string {
	switch t {
	case TransportNone:
		return "none"
	case TransportIoctl:
		return "ioctl"
	case TransportWrite:
		return "write"
	}
	return fmt.Sprintf("transport(%d)", uint8(t))
}

// Policy chooses the transport for commands that have both.
type Policy uint8

const (
	// PolicyAuto is rdma-core's rule: ioctl first; ENOTTY turns ioctl off
	// for the file, EPROTONOSUPPORT turns it off for that method only.
	PolicyAuto Policy = iota
	// PolicyIoctl uses ioctl only and fails where the kernel has none.
	PolicyIoctl
	// PolicyWrite uses write() for every command that has a write form.
	PolicyWrite
)

// ErrClosed is returned by every File method that would make a syscall on
// the file's descriptor after Close. provider.ErrClosed and
// uverbs.ErrClosed are this value.
var ErrClosed = errors.New("object closed")

// ErrNoIoctl reports that a command has no ioctl form on this kernel, or
// that ioctl was switched off by the policy.
var ErrNoIoctl = errors.New("abi: no ioctl method for this command")

// File is an open uverbs command file (/dev/infiniband/uverbsN): the one
// syscall chokepoint of goverbs. Every command, doorbell write and queue
// mapping goes through its methods, which count the syscalls they make.
//
// A File is safe for concurrent use. It owns its descriptor the way Go's
// internal/poll.FD does: every method that makes a syscall on the
// descriptor holds a reference for the syscall's duration, Close marks the
// file closed (new calls fail with ErrClosed at once) and the close(2)
// runs only once the last reference is dropped. So no syscall ever runs on
// a descriptor number after Close, whatever the kernel has given that
// number to since.
type File struct {
	fd       int
	state    atomic.Uint64 // fdClosed | syscalls made through a reference | references held
	k        kernel.Kernel
	quick    bool // the real kernel: Ioctl.Quick calls are raw syscalls (realKernel.IoctlQuick); false on a fake
	cpuClose bool // OpenCPU: the real kernel, and Close's close(2) is a raw syscall
	path     string
	driverID uint32

	// rule is the transport rule in one word, so that the common case
	// (PolicyAuto, ioctl working, no method fallen back) is one load and a
	// compare with 0: the Policy in rulePolicy's bits, ruleNoIoctl once
	// ENOTTY was seen (the kernel has no RDMA_VERBS_IOCTL), ruleAnyWrite
	// once writeFor holds a method (every command must look it up).
	rule atomic.Uint32
	// invokes: the kept INVOKE_WRITE call of each command (invokeIoctl),
	// made on first use: legacy command n at n, extended command n at 64+n.
	// The table itself is made on first use too: the flat path (flatInvoke)
	// sends most commands without it, and as a field its 1 KiB was most
	// of what an Open allocated and cleared.
	invokes  atomic.Pointer[invokeTable]
	writeFor sync.Map // ioctlKey → struct{}: methods that said EPROTONOSUPPORT

	syscalls atomic.Uint64 // syscalls made without a reference (munmap, close)
	mappings atomic.Uint64 // the mmap and munmap calls among syscalls
}

// File.state: bit 63 is the closed bit, bits 20-62 count the syscalls
// made with a reference, bits 0-19 count the references held (one per
// syscall in flight). One atomic add takes a reference and counts the
// syscall, one drops it: the doorbell's whole bookkeeping.
const (
	fdClosed  = 1 << 63
	refBits   = 20
	refMask   = 1<<refBits - 1
	oneCall   = 1 << refBits
	callsMask = fdClosed - 1 - refMask
)

// acquire takes a reference for one syscall on f.fd and counts the
// syscall; it fails once Close has begun. Every successful acquire is
// paired with a release.
func (f *File) acquire() bool {
	if f.state.Add(oneCall+1)&fdClosed != 0 {
		f.state.Add(^uint64(oneCall)) // undo both: -(oneCall+1)
		return false
	}
	return true
}

// release drops a reference.
func (f *File) release() { f.state.Add(^uint64(0)) }

// Closed reports whether Close has been called.
func (f *File) Closed() bool { return f.state.Load()&fdClosed != 0 }

type ioctlKey uint32

func keyOf(object, method uint16) ioctlKey { return ioctlKey(object)<<16 | ioctlKey(method) }

// Open opens the uverbs character device at path. driverID is the device's
// RDMA driver id (from netlink); every ioctl header carries it, and the
// kernel rejects a wrong one with EINVAL.
func Open(path string, driverID uint32) (*File, error) { return open(path, driverID, false) }

// OpenCPU is Open for a device whose driver does its work on the CPU
// (rxe, siw: Ioctl.Quick's rule): the open(2) and Close's close(2) are raw
// syscalls. Opening the character device (devtmpfs) and closing it, which
// destroys every object left in the context, wait on no device; as
// ordinary syscalls they were the longest of a loop of opens and closes,
// and the runtime's monitor took the goroutine's P in them and went back
// to waking every 20 µs (realKernel.IoctlQuick).
func OpenCPU(path string, driverID uint32) (*File, error) { return open(path, driverID, true) }

func open(path string, driverID uint32, cpu bool) (*File, error) {
	f := &File{path: path, driverID: driverID}
	if open, ok := kernel.LookupFake(path); ok {
		fd, k, err := open()
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
		f.fd, f.k = fd, k
		return f, nil
	}
	var fd int
	var err error
	if cpu {
		fd, err = rawOpen(path, unix.O_RDWR|unix.O_CLOEXEC)
	} else {
		fd, err = unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f.fd, f.k, f.quick, f.cpuClose = fd, realKernel{}, true, cpu
	return f, nil
}

// Path is the character device the file was opened from.
func (f *File) Path() string { return f.path }

// DriverID is the driver id carried in every ioctl header.
func (f *File) DriverID() uint32 { return f.driverID }

// Fd is the file descriptor number, for diagnostics only: do not close it
// or make syscalls on it (after Close the number may name another file).
func (f *File) Fd() int { return f.fd }

// Syscalls is the number of syscalls made through this file so far.
func (f *File) Syscalls() uint64 {
	return (f.state.Load()&callsMask)>>refBits + f.syscalls.Load()
}

// Mappings is how many of Syscalls were mmap or munmap calls (queue and
// doorbell-page mappings); the rest are commands and doorbell writes.
func (f *File) Mappings() uint64 { return f.mappings.Load() }

// File.rule's parts.
const (
	rulePolicy   = 3 // the Policy's bits
	ruleNoIoctl  = 4
	ruleAnyWrite = 8
)

// SetPolicy sets the transport policy (tests force each path with it).
func (f *File) SetPolicy(p Policy) {
	for {
		r := f.rule.Load()
		if f.rule.CompareAndSwap(r, r&^rulePolicy|uint32(p)&rulePolicy) {
			return
		}
	}
}

// Policy is the current transport policy.
func (f *File) Policy() Policy { return Policy(f.rule.Load() & rulePolicy) }

// ioctlAllowed reports whether a command with this ioctl method should be
// tried by ioctl first. The common case inlines: one load.
func (f *File) ioctlAllowed(object, method uint16) bool {
	r := f.rule.Load()
	return r == 0 || f.ioctlAllowedRule(r, object, method)
}

// ioctlAllowedRule is ioctlAllowed when the rule is not the plain one.
func (f *File) ioctlAllowedRule(r uint32, object, method uint16) bool {
	switch Policy(r & rulePolicy) {
	case PolicyWrite:
		return false
	case PolicyIoctl:
		return true
	}
	if r&ruleNoIoctl != 0 {
		return false
	}
	if r&ruleAnyWrite == 0 {
		// No method has fallen back: skip the map, whose lookup (an
		// interface hash) cost as many instructions as encoding the call.
		return true
	}
	_, write := f.writeFor.Load(keyOf(object, method))
	return !write
}

// noteIoctlError remembers what an ioctl failure says about the kernel and
// reports whether the caller may fall back to write().
func (f *File) noteIoctlError(object, method uint16, err error) bool {
	if f.Policy() == PolicyIoctl {
		return false
	}
	switch {
	case errors.Is(err, unix.ENOTTY):
		f.rule.Or(ruleNoIoctl)
		return true
	case errors.Is(err, unix.EPROTONOSUPPORT):
		f.writeFor.Store(keyOf(object, method), struct{}{})
		f.rule.Or(ruleAnyWrite) // after the Store: a reader that sees the flag finds the method
		return true
	}
	return false
}

// Write issues one write() of p on the command file: the form of every
// legacy command. It allocates nothing.
func (f *File) Write(p []byte) error {
	if !f.acquire() {
		return ErrClosed
	}
	n, err := f.k.Write(f.fd, p)
	f.release()
	if err != nil {
		return err
	}
	if n != len(p) {
		return fmt.Errorf("abi: short write: %d of %d bytes", n, len(p))
	}
	return nil
}

// Doorbell issues a fast-path doorbell write (rxe's send doorbell): one
// raw write() that never blocks, counted like every syscall. It allocates
// nothing. Commands use Write or Invoke, which let the scheduler run other
// goroutines while the kernel works.
func (f *File) Doorbell(p []byte) error {
	if !f.acquire() {
		return ErrClosed
	}
	if f.quick {
		// The syscall itself, inlined: no interface dispatch and no
		// wrapper's call on the fast path. doorbellStart and doorbellEnd
		// time it in a goverbs_dbtime build and are nothing otherwise.
		t0 := doorbellStart()
		n, e := doorbellWrite(f.fd, p)
		doorbellEnd(t0)
		runtime.KeepAlive(p)
		f.release()
		if e != 0 {
			return e
		}
		if int(n) != len(p) {
			return errShortDoorbell(int(n), len(p))
		}
		return nil
	}
	n, err := f.k.Doorbell(f.fd, p)
	f.release()
	if err != nil {
		return err
	}
	if n != len(p) {
		return errShortDoorbell(n, len(p))
	}
	return nil
}

// errShortDoorbell is a doorbell write the kernel took only part of.
func errShortDoorbell(n, want int) error {
	return fmt.Errorf("abi: short doorbell write: %d of %d bytes", n, want)
}

// Mmap maps length bytes of the command file at offset (rxe queues, mlx5
// UAR pages). The caller owns the mapping and releases it with Munmap.
func (f *File) Mmap(offset int64, length int) ([]byte, error) {
	if !f.acquire() {
		return nil, ErrClosed
	}
	defer f.release()
	f.mappings.Add(1)
	return f.k.Mmap(f.fd, offset, length)
}

// Munmap releases a mapping made by Mmap. It names no descriptor, so it
// works after Close too: a mapping outlives the file it was made from
// (and keeps the kernel's file open until it is released).
func (f *File) Munmap(b []byte) error {
	f.syscalls.Add(1)
	f.mappings.Add(1)
	return f.k.Munmap(b)
}

// Close closes the command file. Calls that have not started fail with
// ErrClosed from now on; Close waits for the syscalls in flight to return,
// then closes the descriptor. It is idempotent.
func (f *File) Close() error {
	if f.state.Or(fdClosed)&fdClosed != 0 {
		return nil
	}
	// Wait for the syscalls in flight (a doorbell, a command: short).
	for f.state.Load()&refMask != 0 {
		time.Sleep(10 * time.Microsecond)
	}
	f.syscalls.Add(1)
	if f.cpuClose {
		return CloseCPU(f.fd)
	}
	return f.k.Close(f.fd)
}

// kernelBuf returns n zeroed bytes on the heap. Any buffer whose address is
// handed to the kernel as an integer (a response pointer, an ioctl
// attribute) must come from here: since Go 1.25 a small make() that does not
// escape may live on the goroutine stack, which moves when it grows, and the
// compiler cannot see an address stored as an integer. Returning the slice
// from a function that is never inlined forces it to the heap, where Go
// never moves objects.
//
//go:noinline
func kernelBuf(n int) []byte { return make([]byte, n) }
