package uverbs

import (
	"flag"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/mmap"
)

// leakCycles: the checks are exact (fds, device mappings and the kernel's
// object counts must come back to their values), so a leak of one object per
// cycle fails after one cycle; 1,000 cycles catch a leak of one per hundred
// too, in ~10 s per device under TCG (10,000 took 130-190 s per device in
// make test). -leak.cycles=10000 is the scale.
var leakCycles = flag.Int("leak.cycles", 1000, "create/destroy cycles in TestNoLeaksRig (10000: the issue's scale)")

// kernelResources reads the kernel's object counts for dev from `rdma
// resource show` ("0: rxe0: pd 1 cq 2 qp 1 cm_id 0 mr 0 ctx 1 srq 0").
func kernelResources(t *testing.T, dev string) string {
	t.Helper()
	out, err := exec.Command("rdma", "resource", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("rdma resource show: %v: %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, " "+dev+": ") {
			return strings.TrimSpace(regexp.MustCompile(`^\d+: `).ReplaceAllString(line, ""))
		}
	}
	t.Fatalf("rdma resource show has no line for %s:\n%s", dev, out)
	return ""
}

// TestNoLeaksRig creates and destroys PD+MR+CQ+QP many times and checks
// that no fd, mapping or kernel object is left behind.
func TestNoLeaksRig(t *testing.T) {
	rigtest.Require(t)
	for _, name := range []string{"rxe0", "siw0"} {
		t.Run(name, func(t *testing.T) {
			d := rigDevice(t, name)
			c, err := Open(d)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			buf, err := mmap.Anonymous(1 << 16)
			if err != nil {
				t.Fatal(err)
			}
			defer buf.Close()
			cycle := func() {
				pd, err := c.AllocPD()
				if err != nil {
					t.Fatal(err)
				}
				mr, err := pd.RegMR(buf.Bytes(), AccessLocalWrite|AccessRemoteWrite)
				if err != nil {
					t.Fatal(err)
				}
				cq, err := c.CreateCQ(64, CQOptions{})
				if err != nil {
					t.Fatal(err)
				}
				qp, err := pd.CreateQP(QPInit{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
				if err != nil {
					t.Fatal(err)
				}
				for _, closer := range []interface{ Close() error }{qp, cq, mr, pd} {
					if err := closer.Close(); err != nil {
						t.Fatal(err)
					}
				}
			}
			cycle() // warm up: the first cycle may grow runtime structures
			fds, maps, devMaps := countFDs(t), mustCount(t), deviceMappings(t)
			mapsBefore := readMaps(t)
			res := kernelResources(t, name)
			sys := c.Syscalls()
			for i := 0; i < *leakCycles; i++ {
				cycle()
			}
			perCycle := float64(c.Syscalls()-sys) / float64(*leakCycles)
			if got := countFDs(t); got != fds {
				t.Errorf("open fds %d → %d after %d cycles", fds, got, *leakCycles)
			}
			// Mappings of the device file are the queues: they must all be
			// gone. Other mappings may grow with the Go heap; they are
			// logged, and a leak of our own anonymous regions would show as
			// growth in step with the cycles, far beyond the heap's.
			if got := deviceMappings(t); got != devMaps {
				t.Errorf("device mappings %d → %d after %d cycles", devMaps, got, *leakCycles)
			}
			// rxe retires a closed CQ's ring as a private copy that a Poll
			// in flight may still read; the garbage collector unmaps it
			// (runtime.AddCleanup) once no Poll can hold it. Cleanups run on
			// one goroutine after a GC: on a loaded machine they lag, so
			// wait (up to 10 s) for the count to settle.
			got := mustCount(t)
			for deadline := time.Now().Add(10 * time.Second); got > maps+8 && time.Now().Before(deadline); got = mustCount(t) {
				runtime.GC()
				time.Sleep(50 * time.Millisecond)
			}
			if got > maps+8 {
				t.Errorf("mappings %d → %d after %d cycles; new since the first cycle:\n%s", maps, got, *leakCycles, newMappings(mapsBefore, readMaps(t)))
			} else {
				t.Logf("all mappings %d → %d (Go heap growth)", maps, got)
			}
			if got := kernelResources(t, name); got != res {
				t.Errorf("kernel resources %q → %q after %d cycles", res, got, *leakCycles)
			}
			t.Logf("%d cycles on %s: %.1f syscalls per cycle; kernel resources %q; fds %d; mappings %d", *leakCycles, name, perCycle, res, fds, maps)
		})
	}
}

// deviceMappings counts this process's mappings of uverbs device files.
func deviceMappings(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "/dev/infiniband/uverbs")
}

func readMaps(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// newMappings lists the lines of after whose address range before lacks.
func newMappings(before, after string) string {
	had := map[string]bool{}
	for _, l := range strings.Split(before, "\n") {
		had[strings.Fields(l + " x")[0]] = true
	}
	var b strings.Builder
	for _, l := range strings.Split(after, "\n") {
		if l != "" && !had[strings.Fields(l)[0]] {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func mustCount(t *testing.T) int {
	t.Helper()
	n, err := mmap.CountMappings()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestContextCloseReleasesQueuesRig closes a context with its CQ, SRQ and
// QP still open: their queue mappings must go with it.
func TestContextCloseReleasesQueuesRig(t *testing.T) {
	rigtest.Require(t)
	d := rigDevice(t, "rxe0")
	base := deviceMappings(t)
	c, err := Open(d)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(16, CQOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srq, err := pd.CreateSRQ(SRQInit{MaxWR: 8, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(QPInit{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if got := deviceMappings(t); got != base+4 { // rxe maps the CQ, the SRQ, the QP's SQ and RQ
		t.Errorf("device mappings with CQ+SRQ+QP open: %d, want %d", got, base+4)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := deviceMappings(t); got != base {
		t.Errorf("device mappings %d after Context.Close, want %d", got, base)
	}
	if err := qp.Close(); err != nil || srq.Close() != nil || cq.Close() != nil {
		t.Errorf("Close after the context closed: %v", err)
	}
}

// TestCopyOnForkRig: CopyOnFork agrees with what iproute2's `rdma system
// show` reads from the same netlink request (SYS_GET): "copy-on-fork on"
// means true. Debian's 6.1 and later kernels answer COPY_ON_FORK = 1
// unconditionally (core/nldev.c nldev_sys_get_doit; the attribute came in
// 5.13); 5.10 sends no such attribute (the tool then says "off", or
// nothing): pinned pages do not survive fork there, and CopyOnFork must say
// false.
func TestCopyOnForkRig(t *testing.T) {
	rigtest.Require(t)
	out, err := exec.Command("rdma", "system", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("rdma system show: %v\n%s", err, out)
	}
	kernelSays := strings.Contains(string(out), "copy-on-fork on")
	t.Logf("kernel %s: rdma system show: %s", rigtest.Kernel(), strings.TrimSpace(string(out)))
	if got := CopyOnFork(); got != kernelSays {
		t.Fatalf("kernel %s: CopyOnFork() = %v, but rdma system show says %q", rigtest.Kernel(), got, strings.TrimSpace(string(out)))
	}
}
