package uverbs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Device loss. A driver with disassociate_ucontext (mlx5; rxe on Linux 7.3)
// revokes an open context when its device goes: every command fails with
// EIO and the kernel queues a DEVICE_FATAL async event; a Wait that meets
// that EIO (lostOr) or the async reader that does wakes every waiter as
// below. rxe up to 6.12 and siw have none: when
// their device is removed (rdma link delete, or the netdev going away) the
// kernel deletes the character device at once, then waits — silently — for
// every open context to close before the removal finishes
// (ib_uverbs_remove_one). goverbs makes that loss visible: the context's
// first completion channel, or its first NextAsyncEvent, starts a watch on
// the character device's directory (inotify), and when the context's device
// node is deleted every waiter is woken: NextAsyncEvent returns an
// EventDeviceFatal event, the Waits an error wrapping ENODEV. A program that
// then closes its Context lets the removal finish.
//
// The watch starts with the channel, not with the first CQ.Wait: its
// syscalls (inotify_init1, inotify_add_watch, the poller's epoll_ctl, a
// stat) are ordinary ones, and its reader is a new goroutine, which wakes
// another thread; on a Wait's path they delayed the first completion of a
// connection (an rsocket's first message) and woke the runtime's monitor
// from its deep sleep into its 20 µs naps (see readQuick).

// watchDevice starts the device watch, once per context.
func (c *Context) watchDevice() {
	if c.watchStarted.Load() {
		return
	}
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	if c.watchStarted.Swap(true) || c.closed.Load() {
		return
	}
	dir, name := filepath.Split(c.dev.CharDev)
	if name == "" {
		return
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return // no watch: loss is then reported only by the kernel's errors
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_DELETE|unix.IN_DELETE_SELF); err != nil {
		unix.Close(fd) // a device path that is not a file (the mlx5 model)
		return
	}
	c.watch = os.NewFile(uintptr(fd), "uverbs-device-watch")
	if c.nodeGone() {
		c.deviceLost(lostNode) // gone before the watch began
	}
	go c.readWatch(c.watch, name)
}

// readWatch waits for the deletion of the device node name. Reading parks
// on the runtime poller; Context.Close ends it by closing the file.
func (c *Context) readWatch(f *os.File, name string) {
	buf := make([]byte, 4096)
	for {
		n, err := f.Read(buf)
		if err != nil {
			return
		}
		for b := buf[:n]; len(b) >= unix.SizeofInotifyEvent; {
			mask := binary.NativeEndian.Uint32(b[4:])
			l := int(binary.NativeEndian.Uint32(b[12:]))
			if unix.SizeofInotifyEvent+l > len(b) {
				break
			}
			ev := strings.TrimRight(string(b[unix.SizeofInotifyEvent:unix.SizeofInotifyEvent+l]), "\x00")
			if mask&unix.IN_DELETE_SELF != 0 || (mask&unix.IN_DELETE != 0 && ev == name) {
				c.deviceLost(lostNode)
				return
			}
			b = b[unix.SizeofInotifyEvent+l:]
		}
	}
}

// DeviceRemoved tells the Context that its device is being removed when
// the device watch cannot see it yet, and wakes every waiter as the
// deletion of the device node would: CQ.Wait and CompChannel.Wait return
// an error wrapping ENODEV (after the completions still there),
// NextAsyncEvent an EventDeviceFatal event. The case: the RDMA connection
// manager's DEVICE_REMOVAL comes first, and the kernel deletes the uverbs
// node only after every CM ID on the device is destroyed; rdmacm calls
// DeviceRemoved for the contexts of its connections on the device. Close
// the Context then, so the removal can finish. Idempotent.
func (c *Context) DeviceRemoved() { c.deviceLost(lostCM) }

// lossWhy is how the context saw its device go, for the waiters' error.
type lossWhy uint32

const (
	lostNode    lossWhy = iota // the device watch saw the node deleted
	lostCM                     // DeviceRemoved: the connection manager's DEVICE_REMOVAL
	lostRevoked                // the kernel revoked the context (EIO)
)

// deviceLost wakes every waiter on the context; the first call's why is
// the one the waiters' errors give.
func (c *Context) deviceLost(why lossWhy) {
	c.lostOnce.Do(func() {
		c.lostWhy.Store(uint32(why))
		c.lost.Store(true)
		close(c.lostCh)
		for _, ch := range c.channels.list() {
			ch.kick() // its reader is parked in read(2)
		}
	})
}

// nodeGone reports whether the context's device node no longer exists:
// the device was removed (the watch asks as it starts).
func (c *Context) nodeGone() bool {
	if c.dev.CharDev == "" {
		return false
	}
	_, err := os.Stat(c.dev.CharDev)
	return os.IsNotExist(err)
}

// lostOr is err, unless err is EIO: then the device-lost error of verb,
// and the context's waiters are woken. It serves the Waits' own commands
// (the arm of a CQ the kernel arms, the completion channel's read), whose
// only EIO is the kernel's answer to a context it revoked as its device
// went (ib_uverbs_remove_one: "Userspace will see a EIO errno for all
// future access"; a channel's read fails with EIO once its queue is
// closed, which the kernel does to a live file only then). Callers check
// their own Close first: a closed context's channel reads EIO too. The
// revocation can come before the device watch sees the node go: Linux
// 7.3's rxe revokes a context at once when its device goes, and in
// TestDeviceGoneRig (a fresh-clone check, session 62) the node was still
// there when a parked CQ.Wait's read failed with EIO.
func (c *Context) lostOr(verb string, err error) error {
	if errors.Is(err, unix.EIO) {
		c.deviceLost(lostRevoked)
		return c.lostError(verb)
	}
	return err
}

// lostError is a waiter's error once the device is gone.
func (c *Context) lostError(verb string) error {
	var how string
	switch lossWhy(c.lostWhy.Load()) {
	case lostCM:
		how = "the connection manager reported its removal"
	case lostRevoked:
		how = "the kernel revoked the open context: EIO"
	default:
		how = "its character device " + c.dev.CharDev + " was deleted"
	}
	return opError(verb, c.dev.Name, 0, fmt.Errorf("%w: device %s removed (%s)", unix.ENODEV, c.dev.Name, how))
}

// stopWatch ends the device watch (Context.Close).
func (c *Context) stopWatch() error {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	c.watchStarted.Store(true) // no watch starts after Close
	if c.watch == nil {
		return nil
	}
	return c.watch.Close()
}
