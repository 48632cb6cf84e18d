package abi

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFlatDeclines: the flat path makes its one syscall on the real
// kernel's file and declines (done false) when the answer is ENOTTY, the
// kernel's word for "no RDMA ioctl here", so that the builder's path asks
// again and records the fallback; it sends nothing on a fake kernel or
// under another transport rule, and a closed file refuses at once.
func TestFlatDeclines(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	f := &File{fd: p[0], k: realKernel{}, quick: true}
	attrs := []FlatAttr{{ID: 1, Len: 8, Data: 7}}
	out := make([]byte, 16)
	for _, quick := range []bool{true, false} {
		before := f.Syscalls()
		if done, err := f.FlatIoctl(0, 6, quick, attrs, 3, out); done || err != nil {
			t.Errorf("FlatIoctl (quick %v) on a pipe: done %v, %v; want a decline", quick, done, err)
		}
		if n := f.Syscalls() - before; n != 1 {
			t.Errorf("FlatIoctl (quick %v) made %d syscalls, want 1", quick, n)
		}
	}
	c := &Command{Num: 3, In: make([]byte, 8), Out: make([]byte, 16), DriverIn: make([]byte, 12), Quick: true}
	if done, err := f.flatInvoke(c); done || err != nil {
		t.Errorf("flatInvoke on a pipe: done %v, %v; want a decline", done, err)
	}
	bufs := []FlatBuf{{ID: 3, Out: true, B: out}, {ID: 4, B: make([]byte, 12)}, {ID: 5, B: []byte{1, 2}}}
	before := f.Syscalls()
	if done, valid, err := f.FlatMethod(1, 0, true, attrs, bufs); done || valid != 0 || err != nil || f.Syscalls()-before != 1 {
		t.Errorf("FlatMethod on a pipe: done %v, valid %#x, %v, %d syscalls; want a decline after one", done, valid, err, f.Syscalls()-before)
	}
	before = f.Syscalls()
	if done, _, _ := f.FlatMethod(1, 0, true, make([]FlatAttr, flatMaxAttrs-len(bufs)+1), bufs); done || f.Syscalls() != before {
		t.Errorf("FlatMethod took %d attributes, more than its %d", flatMaxAttrs+1, flatMaxAttrs)
	}
	if done, _ := f.FlatIoctl(0, 6, true, make([]FlatAttr, flatMaxInline+1), 3, out); done {
		t.Errorf("FlatIoctl took %d inline attributes, more than its %d", flatMaxInline+1, flatMaxInline)
	}
	f.SetPolicy(PolicyIoctl)
	before = f.Syscalls()
	if done, _ := f.FlatIoctl(0, 6, true, attrs, 3, out); done || f.Syscalls() != before {
		t.Errorf("FlatIoctl under PolicyIoctl: done %v, %d syscalls; want neither", done, f.Syscalls()-before)
	}
	f.SetPolicy(PolicyAuto)
	fake := &File{fd: p[0], k: realKernel{}} // quick false: what a fake kernel's file has
	if done, _ := fake.FlatIoctl(0, 6, true, attrs, 3, out); done || fake.Syscalls() != 0 {
		t.Errorf("FlatIoctl on a fake kernel's file: done %v, %d syscalls; want neither", done, fake.Syscalls())
	}
	f.state.Or(fdClosed)
	if done, err := f.FlatIoctl(0, 6, true, attrs, 3, out); !done || !errors.Is(err, ErrClosed) {
		t.Errorf("FlatIoctl on a closed file: done %v, %v; want ErrClosed", done, err)
	}
	if done, _, err := f.FlatMethod(1, 0, true, attrs, bufs); !done || !errors.Is(err, ErrClosed) {
		t.Errorf("FlatMethod on a closed file: done %v, %v; want ErrClosed", done, err)
	}
}
