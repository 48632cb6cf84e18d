package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Syscall counting without seccomp and without strace: a group of perf
// counters on the raw_syscalls:sys_enter tracepoint, attached to the calling
// thread only (pid 0, cpu -1, not inherited). The leader counts every syscall;
// the members count the same events through tracepoint filters on the
// syscall number: ioctl, write, mmap/munmap, and the runtime's and clock's
// syscalls. One read(2) of the leader returns all five (PERF_FORMAT_GROUP),
// so a measurement is read, call, read; the second read's own entry is
// counted and calibrated away. test/cost/verbs_cost.c opens the same group.
//
// It needs tracefs (for the tracepoint's id) and, on Debian
// (perf_event_paranoid 3), root or CAP_PERFMON.

// The counters of a group, in order.
const (
	kindAll = iota
	kindIoctl
	kindWrite
	kindMmap
	kindRuntime
	nKinds
)

// runtimeSyscalls are the syscalls that are neither a verb's nor its
// library's: the Go scheduler's and the clock's (clock_gettime is a real
// syscall under clocksources without a vDSO path, such as TCG's hpet).
var runtimeSyscalls = []int{
	unix.SYS_FUTEX, unix.SYS_RT_SIGRETURN, unix.SYS_RT_SIGPROCMASK, unix.SYS_RT_SIGACTION,
	unix.SYS_SIGALTSTACK, unix.SYS_SCHED_YIELD, unix.SYS_NANOSLEEP, unix.SYS_CLOCK_GETTIME,
	unix.SYS_CLOCK_NANOSLEEP, unix.SYS_GETTIMEOFDAY, unix.SYS_GETTID, unix.SYS_TGKILL,
	unix.SYS_GETPID, unix.SYS_CLONE, unix.SYS_CLONE3, unix.SYS_EPOLL_PWAIT,
}

// filters are the members' tracepoint filters ("" counts everything).
func filters() [nKinds]string {
	or := func(ids ...int) string {
		s := make([]string, len(ids))
		for i, id := range ids {
			s[i] = "id == " + strconv.Itoa(id)
		}
		return strings.Join(s, " || ")
	}
	return [nKinds]string{
		kindAll:     "",
		kindIoctl:   or(unix.SYS_IOCTL),
		kindWrite:   or(unix.SYS_WRITE),
		kindMmap:    or(unix.SYS_MMAP, unix.SYS_MUNMAP),
		kindRuntime: or(runtimeSyscalls...),
	}
}

// tracepointDirs are where tracefs may be mounted.
var tracepointDirs = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}

// sysCounter is an open counter group on the calling thread. The caller
// must stay on that thread (runtime.LockOSThread) for as long as it reads.
type sysCounter struct {
	fds  [nKinds]int
	buf  []byte
	base [nKinds]uint64 // what an empty read-read pair counts
}

// counts are the values of a group.
type counts [nKinds]uint64

func tracepointID() (uint64, error) {
	for _, d := range tracepointDirs {
		b, err := os.ReadFile(d + "/events/raw_syscalls/sys_enter/id")
		if err == nil {
			return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		}
	}
	return 0, fmt.Errorf("no raw_syscalls:sys_enter tracepoint under %s (mount tracefs: mount -t tracefs nodev /sys/kernel/tracing)",
		strings.Join(tracepointDirs, " or "))
}

// openSysCounter opens the group on the calling thread and calibrates it.
func openSysCounter() (*sysCounter, error) {
	id, err := tracepointID()
	if err != nil {
		return nil, err
	}
	c := &sysCounter{buf: make([]byte, 8*(1+nKinds))}
	for i := range c.fds {
		c.fds[i] = -1
	}
	attr := unix.PerfEventAttr{
		Type:        unix.PERF_TYPE_TRACEPOINT,
		Size:        uint32(binary.Size(unix.PerfEventAttr{})),
		Config:      id,
		Read_format: unix.PERF_FORMAT_GROUP,
	}
	for i, f := range filters() {
		group := -1
		if i > 0 {
			group = c.fds[kindAll]
		}
		fd, err := unix.PerfEventOpen(&attr, 0, -1, group, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("perf_event_open(raw_syscalls:sys_enter): %w (needs root or CAP_PERFMON)", err)
		}
		c.fds[i] = fd
		if f != "" {
			if err := unix.IoctlSetString(fd, unix.PERF_EVENT_IOC_SET_FILTER, f); err != nil {
				c.Close()
				return nil, fmt.Errorf("perf filter %q: %w", f, err)
			}
		}
	}
	// Calibrate: the least an empty read-read pair counts (the second
	// read's own entry).
	for k := range c.base {
		c.base[k] = ^uint64(0)
	}
	for range 7 {
		a, err := c.read()
		if err != nil {
			c.Close()
			return nil, err
		}
		b, err := c.read()
		if err != nil {
			c.Close()
			return nil, err
		}
		for k := range c.base {
			c.base[k] = min(c.base[k], b[k]-a[k])
		}
	}
	return c, nil
}

// read returns the group's current values.
func (c *sysCounter) read() (counts, error) {
	var v counts
	n, err := unix.Read(c.fds[kindAll], c.buf)
	if err != nil {
		return v, fmt.Errorf("reading the syscall counters: %w", err)
	}
	if n != len(c.buf) || binary.NativeEndian.Uint64(c.buf) != nKinds {
		return v, fmt.Errorf("reading the syscall counters: %d bytes, %d counters", n, binary.NativeEndian.Uint64(c.buf))
	}
	for k := range v {
		v[k] = binary.NativeEndian.Uint64(c.buf[8*(1+k):])
	}
	return v, nil
}

// diff is what happened between two reads, calibrated.
func (c *sysCounter) diff(a, b counts) [nKinds]float64 {
	var d [nKinds]float64
	for k := range d {
		v := b[k] - a[k]
		if v >= c.base[k] {
			v -= c.base[k]
		} else {
			v = 0
		}
		d[k] = float64(v)
	}
	d[kindAll] = max(0, d[kindAll]-d[kindRuntime])
	return d
}

// Close closes the group.
func (c *sysCounter) Close() {
	for i := len(c.fds) - 1; i >= 0; i-- {
		if c.fds[i] >= 0 {
			unix.Close(c.fds[i])
			c.fds[i] = -1
		}
	}
}
