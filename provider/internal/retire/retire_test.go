package retire

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/internal/kernel"
	"golang.org/x/sys/unix"
)

// fakeFile records what Mapping asks of the command file.
type fakeFile struct {
	unshared, unmapped atomic.Int64
	unshareErr         error
}

func (k *fakeFile) Ioctl(int, uint, []byte) error        { return unix.ENOTTY }
func (k *fakeFile) Write(int, []byte) (int, error)       { return 0, unix.EINVAL }
func (k *fakeFile) Doorbell(int, []byte) (int, error)    { return 0, unix.EINVAL }
func (k *fakeFile) Mmap(int, int64, int) ([]byte, error) { return nil, unix.EINVAL }
func (k *fakeFile) Munmap([]byte) error                  { k.unmapped.Add(1); return nil }
func (k *fakeFile) Unshare(b []byte) error               { k.unshared.Add(1); clear(b); return k.unshareErr }
func (k *fakeFile) Close(int) error                      { return nil }

func open(t *testing.T, k *fakeFile, path string) *abi.File {
	t.Helper()
	unregister := kernel.RegisterFake(path, func() (int, kernel.Kernel, error) { return 1000, k, nil })
	f, err := abi.Open(path, abi.RDMA_DRIVER_RXE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(); unregister() })
	return f
}

type view struct{ mem []byte }

// TestMapping: the memory is replaced at once (a reader sees zeros) and
// unmapped only once the owner is unreachable; a failed replacement is
// reported and the unmapping still follows.
func TestMapping(t *testing.T) {
	for _, fail := range []bool{false, true} {
		k := &fakeFile{}
		if fail {
			k.unshareErr = unix.ENOMEM
		}
		f := open(t, k, "/dev/infiniband/fake-retire-"+map[bool]string{false: "ok", true: "fail"}[fail])
		mem := []byte{1, 2, 3, 4}
		owner := &view{mem: mem}
		err := Mapping(owner, f, mem)
		if fail != (err != nil) || fail && !errors.Is(err, unix.ENOMEM) {
			t.Errorf("Mapping with Unshare failing %v: %v", fail, err)
		}
		if k.unshared.Load() != 1 || owner.mem[0] != 0 {
			t.Fatalf("Unshare calls %d, memory %v; want 1 and zeros", k.unshared.Load(), owner.mem)
		}
		runtime.GC()
		if k.unmapped.Load() != 0 {
			t.Fatal("unmapped while the owner is reachable")
		}
		runtime.KeepAlive(owner)
		owner = nil
		deadline := time.Now().Add(10 * time.Second)
		for k.unmapped.Load() == 0 && time.Now().Before(deadline) {
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
		if k.unmapped.Load() != 1 || f.Cleanups() != 1 {
			t.Errorf("after the owner went: %d munmaps, %d counted cleanups; want 1 and 1", k.unmapped.Load(), f.Cleanups())
		}
	}
}
