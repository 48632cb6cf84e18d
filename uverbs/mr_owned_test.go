package uverbs

import (
	"testing"

	"github.com/goverbs/goverbs/mmap"
)

// TestRegMRTracksOnlyHeapMemory: RegMR of an open mmap.Region's memory
// neither pins it nor puts the MR in the context's table (mmap.Owns); a
// Go heap slice is pinned and tabled until its MR is closed.
func TestRegMRTracksOnlyHeapMemory(t *testing.T) {
	c := openIoctlKernel(t, "/dev/infiniband/uverbs-regmr-owned", DriverRXE)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	region, err := mmap.Anonymous(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer region.Close()
	tabled := func() int { return len(c.mrs.list()) }
	for _, m := range []struct {
		name string
		buf  []byte
		heap bool
	}{
		{"mmap.Region", region.Bytes()[8:100], false},
		{"heap", make([]byte, 4096), true},
	} {
		mr, err := pd.RegMR(m.buf, AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		mr.mu.RLock()
		pinned := mr.pin != nil
		mr.mu.RUnlock()
		if pinned != m.heap || (tabled() == 1) != m.heap || (mr.reg != 0) != m.heap {
			t.Errorf("%s: pinned %v, tabled %d, tag %#x; want pinned and tabled only for heap memory", m.name, pinned, tabled(), mr.reg)
		}
		if err := mr.Close(); err != nil {
			t.Fatal(err)
		}
		if n := tabled(); n != 0 || mr.pin != nil {
			t.Errorf("%s: after Close, %d MRs tabled, pin %v", m.name, n, mr.pin)
		}
	}
}
