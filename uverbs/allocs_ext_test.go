package uverbs_test

import (
	"fmt"
	"testing"

	"github.com/goverbs/goverbs/internal/kernel"
	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// TestAllocsCloseFromOtherPackage counts the allocations of the small
// objects' Close as a program calls it: from another package, into which
// the compiler inlines Close and compiles its closure afresh. A command
// built inside that closure escaped to the heap there (one allocation
// each DeallocPD), though not in package uverbs' own tests.
func TestAllocsCloseFromOtherPackage(t *testing.T) {
	if uverbs.RaceBuild {
		t.Skip("the race detector's sync.Pool drops items; `make unit` runs this test without -race")
	}
	c := openAllocs(t, uverbs.DriverMTHCA)
	cycle := func() {
		pd, err := c.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		if err := pd.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cycle() // warm: the kept calls
	// One allocation: the PD object itself.
	if n := testing.AllocsPerRun(200, cycle); n != 1 {
		t.Errorf("AllocPD+Close: %.1f allocations per call, want 1", n)
	}
}

// openAllocs opens a context of driver's provider over the allocation
// tests' fake kernel (package uverbs' ioctlKernel, which answers by
// ioctl without allocating), closed when the test ends.
func openAllocs(tb testing.TB, driver uverbs.DriverID) *uverbs.Context {
	c := openAllocsOpen(tb, driver)
	tb.Cleanup(func() { c.Close() })
	return c
}

// openAllocsOpen is openAllocs for a test that closes the context itself.
func openAllocsOpen(tb testing.TB, driver uverbs.DriverID) *uverbs.Context {
	return openFakeOpen(tb, driver, uverbs.NewAllocsKernel)
}

// openFakeOpen opens a context of driver's provider over the fake kernel
// newKernel makes (given the read end of a pipe for its async events).
func openFakeOpen(tb testing.TB, driver uverbs.DriverID, newKernel func(asyncFd int) kernel.Kernel) *uverbs.Context {
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Close(pipe[1]) })
	path := fmt.Sprintf("/dev/infiniband/uverbs-allocs-%d", driver)
	tb.Cleanup(kernel.RegisterFake(path, func() (int, kernel.Kernel, error) { return 1000, newKernel(pipe[0]), nil }))
	c, err := uverbs.Open(uverbs.Device{Name: "allocs0", CharDev: path, Driver: driver})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// openAllocsRXE opens an rxe context over the fake kernel, and a PD in it.
func openAllocsRXE(tb testing.TB) *uverbs.PD {
	pd, err := openAllocs(tb, uverbs.DriverRXE).AllocPD()
	if err != nil {
		tb.Fatal(err)
	}
	return pd
}

// ahAttr is a RoCE v2 address of an IPv4-mapped GID, as ibvcost's
// create_ah row makes.
var ahAttr = uverbs.AHAttr{PortNum: 1, GRH: &uverbs.GlobalRoute{
	DGID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 0, 14: 2, 15: 15}, SGIDIndex: 1, HopLimit: 64}}

// TestAllocsCreateAH counts what CreateAH and Close allocate on rxe: the
// AH objects (goverbs' and the provider's) and nothing for the command.
func TestAllocsCreateAH(t *testing.T) {
	if uverbs.RaceBuild {
		t.Skip("the race detector's sync.Pool drops items; `make unit` runs this test without -race")
	}
	pd := openAllocsRXE(t)
	cycle := func() {
		ah, err := pd.CreateAH(ahAttr)
		if err != nil {
			t.Fatal(err)
		}
		if err := ah.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cycle()
	if n := testing.AllocsPerRun(200, cycle); n > 2 {
		t.Errorf("CreateAH+Close on rxe: %.1f allocations, want at most 2 (the two AH objects)", n)
	}
}

// TestAHAttrIsACopy: the address an AH reports is the one it was created
// with, whatever the caller does afterwards to the GlobalRoute it passed
// or to the one Attr returned.
func TestAHAttrIsACopy(t *testing.T) {
	pd := openAllocsRXE(t)
	g := *ahAttr.GRH
	ah, err := pd.CreateAH(uverbs.AHAttr{PortNum: 1, GRH: &g})
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	g.HopLimit, g.DGID[15] = 1, 99
	got := ah.Attr()
	if got.GRH == nil || *got.GRH != *ahAttr.GRH || got.PortNum != 1 {
		t.Fatalf("Attr after the caller changed its GRH: %+v %+v, want the created %+v", got, got.GRH, *ahAttr.GRH)
	}
	got.GRH.SGIDIndex = 7
	if again := ah.Attr(); *again.GRH != *ahAttr.GRH {
		t.Fatalf("Attr after a change to the GRH it returned: %+v, want %+v", *again.GRH, *ahAttr.GRH)
	}
}

// BenchmarkCreateAH is CreateAH and Close on rxe over the fake kernel:
// the user code of ibvcost's create_ah and destroy_ah rows. Counted by
// callgrind, icCreateAH is its loop (--toggle-collect='*.icCreateAH').
func BenchmarkCreateAH(b *testing.B) {
	pd := openAllocsRXE(b)
	b.ReportAllocs()
	icCreateAH(b, pd, b.N)
}

//go:noinline
func icCreateAH(b *testing.B, pd *uverbs.PD, n int) {
	for i := 0; i < n; i++ {
		ah, err := pd.CreateAH(ahAttr)
		if err != nil {
			b.Fatal(err)
		}
		if err := ah.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRegMR is RegMR of a 4 KiB mapping and Close on rxe over the
// fake kernel: the user code of ibvcost's reg_mr_4KiB and dereg_mr_4KiB
// rows. Counted by callgrind, icRegMR is its loop.
func BenchmarkRegMR(b *testing.B) {
	pd := openAllocsRXE(b)
	buf, err := mmap.Anonymous(4096)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Close()
	b.ReportAllocs()
	icRegMR(b, pd, buf.Bytes(), b.N)
}

//go:noinline
func icRegMR(b *testing.B, pd *uverbs.PD, buf []byte, n int) {
	for i := 0; i < n; i++ {
		mr, err := pd.RegMR(buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
		if err != nil {
			b.Fatal(err)
		}
		if err := mr.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateCQ is CreateCQ (256 entries) and Close on siw over the
// fake kernel: the user code of ibvcost's create_cq and destroy_cq rows
// (siw maps its ring from the kernel, as rxe does). Counted by callgrind,
// icCreateCQ is its loop.
func BenchmarkCreateCQ(b *testing.B) {
	c := openAllocs(b, uverbs.DriverSIW)
	b.ReportAllocs()
	icCreateCQ(b, c, b.N)
}

//go:noinline
func icCreateCQ(b *testing.B, c *uverbs.Context, n int) {
	for i := 0; i < n; i++ {
		cq, err := c.CreateCQ(256, uverbs.CQOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if err := cq.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpenClose is Open and Close of a siw context over the fake
// kernel: the user code of ibvcost's open_device and close_device rows.
// The fake's own share is one allocation an Open (its kernel) and a dup(2)
// (the async event fd Close closes).
func BenchmarkOpenClose(b *testing.B) {
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(pipe[0]); unix.Close(pipe[1]) })
	const path = "/dev/infiniband/uverbs-allocs-openclose"
	b.Cleanup(kernel.RegisterFake(path, func() (int, kernel.Kernel, error) {
		fd, err := unix.Dup(pipe[0])
		return 1000, uverbs.NewAllocsKernel(fd), err
	}))
	d := uverbs.Device{Name: "allocs0", CharDev: path, Driver: uverbs.DriverSIW}
	b.ReportAllocs()
	icOpenClose(b, d, b.N)
}

//go:noinline
func icOpenClose(b *testing.B, d uverbs.Device, n int) {
	for i := 0; i < n; i++ {
		c, err := uverbs.Open(d)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
