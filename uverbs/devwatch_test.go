package uverbs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/internal/kernel"
	"golang.org/x/sys/unix"
)

// openWatchable opens a context on the fake kernel whose device node is a
// plain file (returned, so a test can delete it); chanFd answers
// CREATE_COMP_CHANNEL.
func openWatchable(t *testing.T) (*Context, string) {
	t.Helper()
	c, node, _ := openWatchableAsync(t)
	return c, node
}

// openWatchableAsync is openWatchable that also returns the write end of
// the context's async event file, for a test to send events into.
func openWatchableAsync(t *testing.T) (*Context, string, int) {
	t.Helper()
	node := filepath.Join(t.TempDir(), "uverbs0")
	if err := os.WriteFile(node, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var async, events [2]int
	for _, p := range []*[2]int{&async, &events} {
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(p[1]) })
	}
	t.Cleanup(kernel.RegisterFake(node, func() (int, kernel.Kernel, error) {
		return 1000, &ioctlKernel{asyncFd: async[0], chanFd: events[0]}, nil
	}))
	c, err := Open(Device{Name: "fake0", CharDev: node, Driver: DriverRXE})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, node, async[1]
}

// TestLostOr: a Wait's EIO is the device-lost error (ENODEV, the waiters
// woken), with the device node still there: the kernel revokes a context
// (EIO) before the node goes on Linux 7.3. Any other error is itself.
func TestLostOr(t *testing.T) {
	c, _ := openWatchable(t)
	inval := &OpError{Verb: "ReqNotifyCQ", Device: "fake0", Err: unix.EINVAL}
	if err := c.lostOr("CQ.Wait", inval); err != error(inval) || c.lost.Load() {
		t.Fatalf("EINVAL: %v (lost %v), want the EINVAL itself", err, c.lost.Load())
	}
	eio := &OpError{Verb: "ReqNotifyCQ", Device: "fake0", Err: unix.EIO}
	err := c.lostOr("CQ.Wait", eio)
	if !errors.Is(err, unix.ENODEV) || !strings.Contains(err.Error(), "CQ.Wait") ||
		!strings.Contains(err.Error(), "the kernel revoked the open context") {
		t.Errorf("EIO with the node present: %v, want CQ.Wait's error wrapping ENODEV that says the kernel revoked the context", err)
	}
	select {
	case <-c.lostCh:
	default:
		t.Error("EIO did not wake the context's waiters")
	}
	// The first way the loss was seen is the one every waiter hears of.
	c.DeviceRemoved()
	if err := c.lostError("CompChannel.Wait"); !strings.Contains(err.Error(), "the kernel revoked the open context") {
		t.Errorf("after a later DeviceRemoved: %v, want the first cause (the revoked context)", err)
	}
}

// TestCompChannelStartsDeviceWatch: creating a completion channel starts
// the context's device watch, so that no Wait makes its syscalls, and the
// deletion of the device node is seen with no Wait ever made (the node is
// a plain file here, the kernel a fake).
func TestCompChannelStartsDeviceWatch(t *testing.T) {
	c, node := openWatchable(t)
	if c.watchStarted.Load() {
		t.Fatal("the device watch started before any channel or wait")
	}
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if !c.watchStarted.Load() {
		t.Fatal("CreateCompChannel did not start the device watch")
	}
	if err := os.Remove(node); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.lostCh:
	case <-time.After(10 * time.Second):
		t.Fatal("the device node's deletion was not seen within 10 s")
	}
}

// TestOneFatalEvent: when the kernel's DEVICE_FATAL reaches a waiter
// before the device watch sees the node go (Linux 7.3's rxe sends one), a
// NextAsyncEvent made after it is not a waiter of the removal: it gets
// the ENODEV error once the loss is seen, not a second fatal event (the
// rig's TestDeviceGoneRig saw that once on 7.3.4).
func TestOneFatalEvent(t *testing.T) {
	c, node, async := openWatchableAsync(t)
	first := make(chan error, 1)
	go func() {
		ev, err := c.NextAsyncEvent(context.Background())
		if err == nil && ev.Type != EventDeviceFatal {
			err = errors.New("event " + ev.Type.String())
		}
		first <- err
	}()
	desc := abi.IbUverbsAsyncEventDesc{EventType: uint32(EventDeviceFatal)}
	if _, err := unix.Write(async, abi.Bytes(&desc)); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatalf("the first NextAsyncEvent: %v, want the kernel's DEVICE_FATAL", err)
	}
	// The node goes while the second call waits (the watch started with
	// the first call).
	go func() {
		time.Sleep(50 * time.Millisecond)
		os.Remove(node)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := c.NextAsyncEvent(ctx)
	if !errors.Is(err, unix.ENODEV) {
		t.Errorf("NextAsyncEvent after the fatal event: %+v, %v; want an error wrapping ENODEV", ev, err)
	}
}

// TestChannelStopEIO: a completion channel whose read failed with EIO (the
// kernel revoked the context) gives every waiter the device-lost error,
// also one that took the channel's stop rather than the context's loss
// (CQ.Wait parked behind another reader, as TestDeviceGoneRig's was on
// Linux 7.3.4).
func TestChannelStopEIO(t *testing.T) {
	c, _ := openWatchable(t)
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	ch.stopOnce.Do(func() { ch.err = unix.EIO; close(ch.stopped) })
	err = ch.stopError("CQ.Wait")
	if !errors.Is(err, unix.ENODEV) || !strings.Contains(err.Error(), "the kernel revoked the open context") {
		t.Errorf("stopError after an EIO read: %v, want the device-lost error (ENODEV, the context revoked)", err)
	}
	select {
	case <-c.lostCh:
	default:
		t.Error("the EIO stop did not wake the context's waiters")
	}
}
