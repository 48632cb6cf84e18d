package uverbs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"golang.org/x/sys/unix"
)

// TestMemlockAdviceRig: with RLIMIT_MEMLOCK at 64 KiB and without
// CAP_IPC_LOCK (which root has, and which lets ib_umem_get ignore the
// limit: core/umem.c), registering 1 MiB fails with ENOMEM, and the error
// says what the limit is and how to raise it.
func TestMemlockAdviceRig(t *testing.T) {
	rigtest.Require(t)
	c, err := Open(rigDevice(t, "rxe0"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	buf := newBuffer(t, 1<<20)

	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
		t.Fatal(err)
	}
	low := unix.Rlimit{Cur: 64 << 10, Max: old.Max}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &low); err != nil {
		t.Fatal(err)
	}
	defer unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old)

	// Capabilities are per thread: drop CAP_IPC_LOCK on a goroutine locked
	// to its thread, register from it, and let it exit still locked so Go
	// terminates that thread. Restoring the capability instead would leave
	// the thread with new credentials, and uverbs refuses write() from
	// credentials other than the opener's (ib_safe_file_access: EACCES).
	result := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var caps [2]unix.CapUserData
		if err := unix.Capget(&hdr, &caps[0]); err != nil {
			result <- err
			return
		}
		caps[0].Effective &^= 1 << unix.CAP_IPC_LOCK
		if err := unix.Capset(&hdr, &caps[0]); err != nil {
			result <- err
			return
		}
		_, err := pd.RegMR(buf.Bytes(), AccessLocalWrite)
		result <- err
	}()
	err = <-result
	var e *OpError
	switch {
	case !errors.Is(err, unix.ENOMEM):
		t.Fatalf("RegMR over RLIMIT_MEMLOCK: err = %v, want ENOMEM", err)
	case !errors.As(err, &e) || !strings.Contains(e.Advice, "RLIMIT_MEMLOCK is 64 KiB") || !strings.Contains(e.Advice, "ulimit -l"):
		t.Fatalf("no memlock advice in %q", err)
	}
	t.Logf("%v", err)
}

// TestDeviceGoneRig removes a device while a context is open. rxe has no
// disassociate_ucontext, so the kernel deletes the char device at once but
// waits for open contexts before finishing (core/uverbs_main.c
// ib_uverbs_remove_one): a new Open fails with the device-gone advice, the
// open context keeps working, and closing it lets the removal finish.
// The removal is not silent: goroutines parked in NextAsyncEvent, CQ.Wait
// and CompChannel.Wait are woken (DEVICE_FATAL, ENODEV).
func TestDeviceGoneRig(t *testing.T) {
	rigtest.Require(t)
	run := func(args ...string) {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	run("ip", "link", "add", "gone0", "type", "dummy")
	defer exec.Command("ip", "link", "del", "gone0").Run()
	run("ip", "link", "set", "gone0", "up")
	run("rdma", "link", "add", "rxegone", "type", "rxe", "netdev", "gone0")
	d := rigDevice(t, "rxegone")
	c, err := Open(d)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(8, CQOptions{Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	cq2, err := c.CreateCQ(8, CQOptions{Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	if err := cq2.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	woken := make(chan string, 3)
	go func() {
		ev, err := c.NextAsyncEvent(context.Background())
		first := fmt.Sprintf("NextAsyncEvent: %v %v", ev.Type, err)
		if err != nil || ev.Type != EventDeviceFatal {
			t.Errorf("NextAsyncEvent after removal = %+v, %v; want DEVICE_FATAL", ev, err)
		}
		// One fatal event, then ENODEV (the doc's promise), whether the
		// kernel sent its own DEVICE_FATAL and then EIO (a disassociated
		// context) or goverbs made the event. Before woken: the test
		// closes the Context once all three are woken.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ev, err = c.NextAsyncEvent(ctx)
		if !errors.Is(err, unix.ENODEV) {
			t.Errorf("the second NextAsyncEvent after removal = %+v, %v; want an error wrapping ENODEV", ev, err)
		}
		woken <- first + "; then " + fmt.Sprint(err)
	}()
	go func() {
		_, err := cq.Wait(context.Background(), make([]WorkCompletion, 1))
		woken <- fmt.Sprintf("CQ.Wait: %v", err)
		if !errors.Is(err, unix.ENODEV) {
			t.Errorf("CQ.Wait after removal = %v, want ENODEV", err)
		}
	}()
	go func() {
		got, err := ch.Wait(context.Background())
		woken <- fmt.Sprintf("CompChannel.Wait: %v", err)
		if got != nil || !errors.Is(err, unix.ENODEV) {
			t.Errorf("CompChannel.Wait after removal = %v, %v; want ENODEV", got, err)
		}
	}()
	time.Sleep(100 * time.Millisecond) // let them park
	removal := exec.Command("rdma", "link", "delete", "rxegone")
	if err := removal.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- removal.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(d.CharDev); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists 10 s after rdma link delete", d.CharDev)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := 0; i < 3; i++ {
		select {
		case s := <-woken:
			t.Logf("woken by the removal: %s", s)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of 3 waiters still parked 10 s after the device node went", 3-i)
		}
	}
	_, err = Open(d)
	var e *OpError
	if err == nil || !errors.As(err, &e) || !strings.Contains(e.Advice, "device is gone") {
		t.Fatalf("Open of a removed device: err = %v, want the device-gone advice", err)
	}
	t.Logf("%v", err)
	// Two kernel behaviours: a driver without disassociate_ucontext makes
	// the removal wait for every open context, which keeps working (rxe up
	// to 6.12); one with it is removed at once and the core answers EIO to
	// every command of the disassociated context (ib_uverbs_remove_one;
	// rxe on 7.3). Which one this kernel does is what AllocPD finds.
	pd, err := c.AllocPD()
	if errors.Is(err, unix.EIO) {
		if !errors.As(err, &e) || !strings.Contains(e.Advice, "device is gone") {
			t.Errorf("AllocPD on a disassociated context: %v, want the device-gone advice", err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("rdma link delete: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the context answers EIO (disassociated) but rdma link delete has not finished 10 s later")
		}
		t.Logf("the kernel disassociated the open context: the removal finished at once, AllocPD: %v", err)
		cq.Close()
		cq2.Close()
		ch.Close()
		if err := c.Close(); err != nil {
			t.Errorf("Close of a disassociated context: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("the open context stopped working while the removal waits: %v", err)
	}
	pd.Close()
	select {
	case err := <-done:
		t.Fatalf("rdma link delete finished (%v) while a context was open", err)
	default:
	}
	// The program closes everything on the signal.
	cq.Close()
	cq2.Close()
	ch.Close()
	c.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("rdma link delete: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("rdma link delete did not finish after the context closed")
	}
}

// TestCredentialsAdviceRig: a write() command from a thread whose
// credentials changed after Open (here: a capset) is refused with EACCES
// (ib_safe_file_access), and the error says why. The thread is discarded.
func TestCredentialsAdviceRig(t *testing.T) {
	rigtest.Require(t)
	c, err := OpenWith(rigDevice(t, "rxe0"), OpenOptions{Transport: PolicyWrite})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	result := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var caps [2]unix.CapUserData
		if err := unix.Capget(&hdr, &caps[0]); err != nil {
			result <- err
			return
		}
		if err := unix.Capset(&hdr, &caps[0]); err != nil { // same set, new credentials
			result <- err
			return
		}
		_, err := c.AllocPD()
		result <- err
	}()
	err = <-result
	var e *OpError
	if !errors.Is(err, unix.EACCES) || !errors.As(err, &e) || !strings.Contains(e.Advice, "credentials") {
		t.Fatalf("AllocPD by write() after a credential change: err = %v, want EACCES with advice", err)
	}
	t.Logf("%v", err)
	if pd, err := c.AllocPD(); err != nil { // other threads keep the opener's credentials
		t.Fatalf("AllocPD from an untouched thread: %v", err)
	} else {
		pd.Close()
	}
}
