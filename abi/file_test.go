package abi

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/goverbs/goverbs/internal/kernel"
	"golang.org/x/sys/unix"
)

// TestNoSyscallAfterClose closes a real file, puts a pipe's write end on
// its descriptor number (as the kernel would hand the lowest free number to
// the next open), and checks that no method reaches the pipe.
func TestNoSyscallAfterClose(t *testing.T) {
	f, err := Open("/dev/null", 0)
	if err != nil {
		t.Fatal(err)
	}
	fd := f.Fd()
	if err := f.Write([]byte{1, 2, 3, 4}); err != nil {
		t.Fatalf("Write before Close: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	if p[0] == fd { // the read end got the number: move it away
		r, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		p[0] = r
	}
	if p[1] != fd { // the write end takes the closed file's number
		if err := unix.Dup3(p[1], fd, unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		unix.Close(p[1])
		p[1] = fd
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	syscalls := f.Syscalls()
	msg := []byte("must not arrive")
	checks := map[string]error{
		"Write":    f.Write(msg),
		"Doorbell": f.Doorbell(msg),
		"Ioctl":    f.Ioctl(NewIoctl(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_CONTEXT)),
	}
	_, checks["Invoke"] = f.Invoke(&Command{Num: IB_USER_VERBS_CMD_ALLOC_PD, In: make([]byte, 8), Out: make([]byte, 8)})
	_, checks["Mmap"] = f.Mmap(0, 4096)
	for name, err := range checks {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if got := f.Syscalls(); got != syscalls {
		t.Errorf("syscalls after Close: %d, want %d", got, syscalls)
	}
	var buf [64]byte
	if n, err := unix.Read(p[0], buf[:]); err != unix.EAGAIN {
		t.Errorf("the descriptor's new owner received %d bytes (%q), err %v", n, buf[:max(n, 0)], err)
	}
}

// closeKernel is a fake that checks that no call is made on its descriptor
// after its Close, and that Close waits for the calls in flight.
type closeKernel struct {
	t        *testing.T
	inFlight atomic.Int32
	closed   atomic.Bool
	calls    atomic.Int64
}

func (k *closeKernel) enter() {
	if k.closed.Load() {
		k.t.Error("a syscall reached the descriptor after close(2)")
	}
	k.inFlight.Add(1)
	k.calls.Add(1)
}

func (k *closeKernel) leave() { k.inFlight.Add(-1) }

func (k *closeKernel) Ioctl(int, uint, []byte) error {
	k.enter()
	defer k.leave()
	return unix.EINVAL
}

func (k *closeKernel) Write(_ int, p []byte) (int, error) {
	k.enter()
	defer k.leave()
	return len(p), nil
}

func (k *closeKernel) Doorbell(fd int, p []byte) (int, error) { return k.Write(fd, p) }

func (k *closeKernel) Mmap(int, int64, int) ([]byte, error) {
	k.enter()
	defer k.leave()
	return make([]byte, 8), nil
}

func (k *closeKernel) Munmap([]byte) error { return nil }

func (k *closeKernel) Close(int) error {
	if n := k.inFlight.Load(); n != 0 {
		k.t.Errorf("close(2) with %d syscalls in flight", n)
	}
	if k.closed.Swap(true) {
		k.t.Error("close(2) twice")
	}
	return nil
}

// TestCloseRacesCommands runs commands, doorbells and mappings from many
// goroutines while Close runs (go test -race): every call either completes
// or fails with ErrClosed, close(2) runs once, after the last call in
// flight, and nothing reaches the descriptor after it.
func TestCloseRacesCommands(t *testing.T) {
	for round := 0; round < 50; round++ {
		k := &closeKernel{t: t}
		path := "/dev/infiniband/test-close-race"
		unregister := kernel.RegisterFake(path, func() (int, kernel.Kernel, error) { return 77, k, nil })
		f, err := Open(path, 0)
		unregister()
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var ok, refused atomic.Int64
		note := func(err error) {
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, ErrClosed):
				refused.Add(1)
			default:
				t.Errorf("unexpected error %v", err)
			}
		}
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 200; i++ {
					switch i % 4 {
					case 0:
						note(f.Write([]byte{1}))
					case 1:
						note(f.Doorbell([]byte{2}))
					case 2:
						_, err := f.Mmap(0, 8)
						note(err)
					case 3:
						err := f.Ioctl(NewIoctl(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_CONTEXT))
						if !errors.Is(err, unix.EINVAL) {
							note(err)
						}
					}
				}
			}()
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if !k.closed.Load() {
			t.Fatal("Close returned without closing the descriptor")
		}
		if refused.Load() == 0 && round == 49 {
			t.Log("no call was refused in the last round (Close won every race late)")
		}
	}
}
