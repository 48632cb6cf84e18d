package uverbs_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/kernel"
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
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pipe[1])
	const path = "/dev/infiniband/uverbs-allocs-ext-test"
	defer kernel.RegisterFake(path, func() (int, kernel.Kernel, error) { return 1000, uverbs.NewAllocsKernel(pipe[0]), nil })()
	c, err := uverbs.Open(uverbs.Device{Name: "allocs1", CharDev: path, Driver: uverbs.DriverMTHCA})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
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
