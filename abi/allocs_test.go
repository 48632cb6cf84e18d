package abi

import "testing"

// TestAllocsSlowPathEncoding: a command encodes, runs and decodes with no
// allocation, by ioctl (builder and INVOKE_WRITE) and by write(). make unit
// runs the TestAllocs tests a second time without -race.
func TestAllocsSlowPathEncoding(t *testing.T) {
	if raceBuild {
		t.Skip("the race detector's sync.Pool drops items; `make unit` runs this test without -race")
	}
	for _, tc := range []struct {
		name string
		run  func(testing.TB, *File)
		p    Policy
	}{
		{"invoke/ioctl", invokeOnce, PolicyIoctl},
		{"invoke/write", invokeOnce, PolicyWrite},
		{"ioctl builder", ioctlOnce, PolicyIoctl},
	} {
		f := openNop(t, "allocs")
		f.SetPolicy(tc.p)
		if n := testing.AllocsPerRun(1000, func() { tc.run(t, f) }); n != 0 {
			t.Errorf("%s: %.1f allocations per command, want 0", tc.name, n)
		}
	}
}

// TestIoctlReleaseForgetsOutputs: a released builder keeps no caller
// memory and starts clean, so a pooled builder cannot leak one call's
// attributes or answers into the next.
func TestIoctlReleaseForgetsOutputs(t *testing.T) {
	dst := make([]byte, 16)
	b := NewIoctl(1, 2)
	b.Handle(0x10, 1)
	out := b.PtrOut(0x11, dst)
	b.called = true
	b.Release()
	if b.n != 0 || b.called || b.err != nil || b.arenaMask|b.outMask|b.dstMask != 0 || b.ids != 0 {
		t.Fatalf("released builder not reset: %d attrs, called %v, err %v, masks %#x %#x %#x, ids %#x",
			b.n, b.called, b.err, b.arenaMask, b.outMask, b.dstMask, b.ids)
	}
	for i, d := range b.dsts {
		if d != nil {
			t.Fatalf("attribute slot %d still holds a caller's buffer", i)
		}
	}
	if b.Valid(out) || b.Output(out) != nil || b.Result(out) != 0 {
		t.Fatal("a released builder answers for the previous call")
	}
}
