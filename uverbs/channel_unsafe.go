package uverbs

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// readQuick is one read(2) of the event file fd into p as a raw syscall,
// without the runtime's entersyscall/exitsyscall: the file is non-blocking,
// so the read never waits (an empty file answers EAGAIN and the caller
// parks on the poller). What it saves is entersyscall's wake-up of the
// runtime's monitor (sysmon), asleep whenever every P was idle, as while a
// waiter is parked: after the wake-up it polls every 20 µs for a
// millisecond or more, re-arming a timer and reading the clock each time
// (the same rule as abi's IoctlQuick and rdmacm's quick commands).
func readQuick(fd uintptr, p []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	if e != 0 {
		return int(n), e
	}
	return int(n), nil
}
