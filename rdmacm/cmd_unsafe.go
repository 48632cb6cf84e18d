package rdmacm

import (
	"runtime"
	"unsafe"

	"github.com/goverbs/goverbs/abi"
	"golang.org/x/sys/unix"
)

// eventRespMin is the shortest event the kernel writes (ucma accepts an
// out length ≥ offsetof(ece)).
const eventRespMin = int(unsafe.Offsetof(abi.RdmaUcmEventResp{}.Ece))

// addrOf is the user-space address of b's first byte, for the u64
// response and optval pointers of ucma commands. b must be heap memory
// kept alive across the write (writeCmd does so).
func addrOf(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// Where each command with a response has its response pointer, for
// EventChannel.call.
const (
	respAtCreateID   = int(unsafe.Offsetof(abi.RdmaUcmCreateId{}.Response))
	respAtDestroyID  = int(unsafe.Offsetof(abi.RdmaUcmDestroyId{}.Response)) // LEAVE_MCAST's too
	respAtQuery      = int(unsafe.Offsetof(abi.RdmaUcmQuery{}.Response))
	respAtInitQPAttr = int(unsafe.Offsetof(abi.RdmaUcmInitQpAttr{}.Response))
	respAtJoinMcast  = int(unsafe.Offsetof(abi.RdmaUcmJoinMcast{}.Response))
	respAtMigrateID  = int(unsafe.Offsetof(abi.RdmaUcmMigrateId{}.Response))
)

// rawWrite is one write(2) of p to fd; keep is kept alive across it
// (the buffer the command's u64 pointer names). quick makes it a raw
// syscall, without the runtime's entersyscall/exitsyscall, for the
// commands quickCommand names (the rule of abi's IoctlQuick): the P is
// held for the call (nothing else runs on it, a stop-the-world waits for
// it), so only for commands the kernel answers without waiting on the
// network or a peer. What it saves: entersyscall wakes the runtime's
// monitor (sysmon) from the deep sleep it enters whenever every P is idle,
// as after each wait for a CM event, and the monitor then polls every
// 20 µs for a millisecond or more, each time re-arming a timer and reading
// the clock (a syscall in the rig's guest, whose clocksource is the HPET).
func rawWrite(fd uintptr, p []byte, keep []byte, quick bool) (int, error) {
	// Two direct calls, not one through a function value: the pointer's
	// conversion stays in the call's arguments, and nothing is indirect.
	var n uintptr
	var e unix.Errno
	if quick {
		n, _, e = unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	} else {
		n, _, e = unix.Syscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
		abi.PassScheduler()
	}
	runtime.KeepAlive(p)
	runtime.KeepAlive(keep)
	if e != 0 {
		return int(n), e
	}
	return int(n), nil
}
