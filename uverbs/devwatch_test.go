package uverbs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/kernel"
	"golang.org/x/sys/unix"
)

// openWatchable opens a context on the fake kernel whose device node is a
// plain file (returned, so a test can delete it); chanFd answers
// CREATE_COMP_CHANNEL.
func openWatchable(t *testing.T) (*Context, string) {
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
	return c, node
}

// TestLostOr: a command's EIO is the device-lost error (ENODEV, the
// waiters woken) once the device node is gone, and only then.
func TestLostOr(t *testing.T) {
	c, node := openWatchable(t)
	eio := &OpError{Verb: "ReqNotifyCQ", Device: "fake0", Err: unix.EIO}
	if err := c.lostOr("CQ.Wait", eio); err != error(eio) || c.lost.Load() {
		t.Fatalf("EIO with the node present: %v (lost %v), want the EIO itself", err, c.lost.Load())
	}
	if err := os.Remove(node); err != nil {
		t.Fatal(err)
	}
	inval := &OpError{Verb: "ReqNotifyCQ", Device: "fake0", Err: unix.EINVAL}
	if err := c.lostOr("CQ.Wait", inval); err != error(inval) {
		t.Errorf("EINVAL with the node gone: %v, want the EINVAL itself", err)
	}
	err := c.lostOr("CQ.Wait", eio)
	if !errors.Is(err, unix.ENODEV) || !strings.Contains(err.Error(), "CQ.Wait") {
		t.Errorf("EIO with the node gone: %v, want CQ.Wait's error wrapping ENODEV", err)
	}
	select {
	case <-c.lostCh:
	default:
		t.Error("EIO with the node gone did not wake the context's waiters")
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
