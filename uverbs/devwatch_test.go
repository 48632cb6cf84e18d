package uverbs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/kernel"
	"golang.org/x/sys/unix"
)

// TestCompChannelStartsDeviceWatch: creating a completion channel starts
// the context's device watch, so that no Wait makes its syscalls, and the
// deletion of the device node is seen with no Wait ever made (the node is
// a plain file here, the kernel a fake).
func TestCompChannelStartsDeviceWatch(t *testing.T) {
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
	defer c.Close()
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
