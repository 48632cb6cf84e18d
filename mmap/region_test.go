package mmap

import (
	"bufio"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// vma describes one mapping as /proc/self/smaps reports it.
type vma struct {
	start, end uintptr
	// VmFlags as the kernel prints them (fs/proc/task_mmu.c): "rd", "wr",
	// "dc" for VM_DONTCOPY, which MADV_DONTFORK sets (not "dd": that is
	// VM_DONTDUMP, MADV_DONTDUMP), "hg" for MADV_HUGEPAGE …
	flags []string
}

// findVMA returns the mapping that contains addr, if any.
func findVMA(t *testing.T, addr uintptr) (vma, bool) {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cur vma
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(fields[0], "-"); ok && !strings.HasSuffix(fields[0], ":") {
			s, err1 := strconv.ParseUint(lo, 16, 64)
			e, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				cur = vma{start: uintptr(s), end: uintptr(e)}
				in = addr >= cur.start && addr < cur.end
				continue
			}
		}
		if in && fields[0] == "VmFlags:" {
			cur.flags = fields[1:]
			return cur, true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return vma{}, false
}

func mustAnonymous(t *testing.T, size int, o Options) *Region {
	t.Helper()
	r, err := AnonymousOpts(size, o)
	if err != nil {
		t.Fatalf("AnonymousOpts(%d, %+v): %v", size, o, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestAnonymousAlignedRoundedZeroed(t *testing.T) {
	ps := PageSize()
	if ps <= 0 || ps&(ps-1) != 0 {
		t.Fatalf("PageSize() = %d, want a power of two", ps)
	}
	for _, tc := range []struct{ size, want int }{
		{1, ps}, {ps - 1, ps}, {ps, ps}, {ps + 1, 2 * ps}, {3*ps - 7, 3 * ps}, {1 << 20, 1 << 20},
	} {
		r := mustAnonymous(t, tc.size, Options{})
		if r.Len() != tc.want || len(r.Bytes()) != tc.want {
			t.Errorf("Anonymous(%d): Len %d, len(Bytes) %d, want %d", tc.size, r.Len(), len(r.Bytes()), tc.want)
		}
		if r.Addr()%uintptr(ps) != 0 {
			t.Errorf("Anonymous(%d): Addr %#x not page aligned", tc.size, r.Addr())
		}
		b := r.Bytes()
		if i := slices.IndexFunc(b, func(c byte) bool { return c != 0 }); i >= 0 {
			t.Errorf("Anonymous(%d): byte %d is %#x, want fresh memory zeroed", tc.size, i, b[i])
		}
		for i := range b {
			b[i] = byte(i)
		}
		if b[len(b)-1] != byte(len(b)-1) {
			t.Errorf("Anonymous(%d): last byte not writable", tc.size)
		}
	}
}

func TestAnonymousBadSize(t *testing.T) {
	for _, size := range []int{0, -1, int(^uint(0) >> 1)} {
		r, err := Anonymous(size)
		if !errors.Is(err, unix.EINVAL) {
			if r != nil {
				r.Close()
			}
			t.Errorf("Anonymous(%d) = %v, want EINVAL", size, err)
		}
	}
}

func TestDontFork(t *testing.T) {
	r := mustAnonymous(t, 3*PageSize(), Options{})
	v, ok := findVMA(t, r.Addr())
	if !ok {
		t.Fatalf("no mapping at %#x in /proc/self/smaps", r.Addr())
	}
	if v.end < r.Addr()+uintptr(r.Len()) {
		t.Errorf("mapping %#x-%#x does not cover the region %#x+%d", v.start, v.end, r.Addr(), r.Len())
	}
	for _, f := range []string{"rd", "wr", "dc"} {
		if !slices.Contains(v.flags, f) {
			t.Errorf("VmFlags %v lack %q (dc = VM_DONTCOPY, set by MADV_DONTFORK)", v.flags, f)
		}
	}

	r2 := mustAnonymous(t, PageSize(), Options{CopyOnFork: true})
	v, ok = findVMA(t, r2.Addr())
	if !ok {
		t.Fatalf("no mapping at %#x in /proc/self/smaps", r2.Addr())
	}
	if slices.Contains(v.flags, "dc") {
		t.Errorf("CopyOnFork: VmFlags %v have dc, want MADV_DONTFORK skipped", v.flags)
	}
}

func TestHugePages(t *testing.T) {
	hp := hugePageSize()
	r := mustAnonymous(t, 1, Options{HugePages: true})
	if r.Len() != hp {
		t.Errorf("Len() = %d, want the huge page size %d", r.Len(), hp)
	}
	if r.Addr()%uintptr(hp) != 0 {
		t.Errorf("Addr() = %#x, not aligned to %d", r.Addr(), hp)
	}
	v, ok := findVMA(t, r.Addr())
	if !ok {
		t.Fatalf("no mapping at %#x", r.Addr())
	}
	if !slices.Contains(v.flags, "dc") {
		t.Errorf("VmFlags %v lack dc (MADV_DONTFORK)", v.flags)
	}
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage"); err == nil && !slices.Contains(v.flags, "hg") {
		t.Errorf("VmFlags %v lack hg (MADV_HUGEPAGE) on a kernel with transparent huge pages", v.flags)
	}
	if b := r.Bytes(); b[0] != 0 || b[len(b)-1] != 0 {
		t.Error("huge page region not zeroed")
	}
}

func TestCloseIdempotentAndUnmaps(t *testing.T) {
	r, err := Anonymous(2 * PageSize())
	if err != nil {
		t.Fatal(err)
	}
	addr := r.Addr()
	if _, ok := findVMA(t, addr); !ok {
		t.Fatalf("mapping at %#x not listed before Close", addr)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close = %v, want nil", err)
	}
	if r.Bytes() != nil || r.Len() != 0 || r.Addr() != 0 {
		t.Errorf("after Close: Bytes %v, Len %d, Addr %#x; want nil, 0, 0", r.Bytes(), r.Len(), r.Addr())
	}
	if v, ok := findVMA(t, addr); ok {
		t.Errorf("after Close /proc/self/smaps still lists %#x-%#x %v", v.start, v.end, v.flags)
	}
}

func TestCloseConcurrent(t *testing.T) {
	r, err := Anonymous(PageSize())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- r.Close() })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent Close: %v", err)
		}
	}
}

func TestCountMappings(t *testing.T) {
	before, err := CountMappings()
	if err != nil {
		t.Fatal(err)
	}
	if before < 1 {
		t.Fatalf("CountMappings() = %d", before)
	}
	// Alternate MADV_DONTFORK so neighbours cannot merge into one line.
	var rs []*Region
	for i := range 16 {
		r, err := AnonymousOpts(PageSize(), Options{CopyOnFork: i%2 == 0})
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	during, err := CountMappings()
	if err != nil {
		t.Fatal(err)
	}
	if during < before+8 {
		t.Errorf("CountMappings: %d before, %d with 16 regions mapped", before, during)
	}
	for _, r := range rs {
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	after, err := CountMappings()
	if err != nil {
		t.Fatal(err)
	}
	// The runtime may map a little more of its own meanwhile.
	if after > before+2 {
		t.Errorf("CountMappings: %d before, %d after closing every region: leak", before, after)
	}
}
