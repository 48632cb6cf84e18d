package abi

import (
	"errors"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/kernel"
	"golang.org/x/sys/unix"
)

// shortKernel answers a doorbell with what it was told to: a count short
// of the command or an errno.
type shortKernel struct {
	nopKernel
	n   int
	err error
}

func (k shortKernel) Doorbell(int, []byte) (int, error) { return k.n, k.err }

// TestDoorbellResults: a doorbell the kernel takes whole is nil; a short
// one says how short; an errno comes back as itself; a doorbell after
// Close is ErrClosed and reaches no kernel. Through a fake kernel (the
// interface's path) and through real descriptors (the inlined raw
// write): /dev/null takes every byte, /dev/full refuses with ENOSPC.
func TestDoorbellResults(t *testing.T) {
	p := make([]byte, 40)
	for _, tc := range []struct {
		name string
		k    shortKernel
		want string
		is   error
	}{
		{"short", shortKernel{n: 39}, "short doorbell write: 39 of 40 bytes", nil},
		{"errno", shortKernel{err: unix.EINVAL}, "", unix.EINVAL},
	} {
		path := "/dev/infiniband/test-doorbell-" + tc.name
		unregister := kernel.RegisterFake(path, func() (int, kernel.Kernel, error) { return 5, tc.k, nil })
		f, err := Open(path, 0)
		unregister()
		if err != nil {
			t.Fatal(err)
		}
		err = f.Doorbell(p)
		if err == nil || (tc.want != "" && !strings.Contains(err.Error(), tc.want)) || (tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("%s: Doorbell = %v, want %q / %v", tc.name, err, tc.want, tc.is)
		}
		f.Close()
	}
	for _, tc := range []struct {
		path string
		is   error
	}{{"/dev/null", nil}, {"/dev/full", unix.ENOSPC}} {
		f, err := OpenCPU(tc.path, 0)
		if err != nil {
			t.Skipf("%s: %v", tc.path, err)
		}
		calls := f.Syscalls()
		if err := f.Doorbell(p); !errors.Is(err, tc.is) || (tc.is == nil) != (err == nil) {
			t.Errorf("%s: Doorbell = %v, want %v", tc.path, err, tc.is)
		}
		if got := f.Syscalls() - calls; got != 1 {
			t.Errorf("%s: the doorbell counted %d syscalls, want 1", tc.path, got)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Doorbell(p); !errors.Is(err, ErrClosed) {
			t.Errorf("%s: Doorbell after Close = %v, want ErrClosed", tc.path, err)
		}
	}
}
