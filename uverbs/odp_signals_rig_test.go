package uverbs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/mmap"
	"golang.org/x/sys/unix"
)

// odpStormChildEnv makes the test binary the child of
// TestODPFirstMappingSignalsRig: a fresh process, whose first ODP
// registration is the one that registers its mm with the MMU notifiers
// (mm_take_all_locks, which gives up on any pending signal: see odpTries).
const odpStormChildEnv = "GOVERBS_ODP_STORM_CHILD"

// odpStormSignals is how many SIGURGs the child's storm sends, 100 µs
// apart: fewer than odpTries, so that at most that many REG_MRs can be
// interrupted and the test cannot fail by the storm's luck, only by a
// RegMR that gives up too soon.
const odpStormSignals = odpTries - 2

// odpStorm is what the child reports: how many REG_MRs its one RegMR sent
// and how many signals it took meanwhile.
type odpStorm struct{ Sent, Signals int }

// TestODPFirstMappingSignalsRig: a process's first on-demand-paging RegMR,
// made while another goroutine sends the registering thread SIGURG (the Go
// runtime's own preemption signal: odpStormSignals of them, 100 µs apart)
// from just before it, succeeds in each of five fresh processes: a REG_MR
// that the kernel gave up on with EINTR is sent again (odpTries). How many
// REG_MRs each took is logged (more than one is the kernel's EINTR seen and
// retried). A device without ODP has nothing to register so (TestODPRig
// checks its refusals): the test says so and ends.
func TestODPFirstMappingSignalsRig(t *testing.T) {
	if os.Getenv(odpStormChildEnv) == "1" {
		odpStormChild(t)
		return
	}
	c := openRig(t, "rxe0", PolicyAuto)
	a, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if a.ODPCaps.General&ODPSupport == 0 {
		t.Logf("rxe0 has no on-demand paging on this kernel (ODP caps %v): no first ODP mapping to interrupt", a.ODPCaps.General)
		return
	}
	sent, signals := 0, 0
	for i := range 5 {
		child := exec.Command(os.Args[0], "-test.run=^TestODPFirstMappingSignalsRig$", "-test.v")
		child.Env = append(os.Environ(), odpStormChildEnv+"=1")
		out, err := child.CombinedOutput()
		var s odpStorm
		if perr := readPeerLine(bufio.NewScanner(bytes.NewReader(out)), "odpstorm", &s); err != nil || perr != nil {
			t.Fatalf("child %d: %v, %v; its output:\n%s", i, err, perr, out)
		}
		if s.Sent < 1 || s.Sent > odpTries {
			t.Errorf("child %d: RegMR sent %d REG_MRs, want 1 to %d", i, s.Sent, odpTries)
		}
		sent += s.Sent
		signals += s.Signals
	}
	t.Logf("5 first ODP registrations under SIGURG every 100 µs: %d REG_MRs sent (%d retried after EINTR), %d signals", sent, sent-5, signals)
}

// odpStormChild makes the process's first ODP registration on rxe0 with its
// thread under a storm of SIGURG, and prints an odpStorm line.
func odpStormChild(t *testing.T) {
	rigtest.Require(t)
	c := openRig(t, "rxe0", PolicyAuto)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	r, err := mmap.Anonymous(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	runtime.LockOSThread() // the storm's target: the thread that sends REG_MR
	defer runtime.UnlockOSThread()
	pid, tid := unix.Getpid(), unix.Gettid()
	started, stop, storm := make(chan struct{}), make(chan struct{}), make(chan int)
	go func() {
		close(started)
		n := 0
		for ; n < odpStormSignals; n++ {
			time.Sleep(100 * time.Microsecond)
			select {
			case <-stop:
				storm <- n
				return
			default:
			}
			if err := unix.Tgkill(pid, tid, unix.SIGURG); err != nil {
				break
			}
		}
		<-stop
		storm <- n
	}()
	<-started // the storm's goroutine runs on a thread of its own by now
	// The parent found ODP: without the capability check's QUERY_DEVICE,
	// every syscall RegMR makes is a REG_MR.
	c.skipCapChecks = true
	before := c.Syscalls()
	mr, err := pd.RegMR(r.Bytes(), AccessLocalWrite|AccessOnDemand)
	sent := int(c.Syscalls() - before)
	close(stop)
	signals := <-storm
	if err != nil {
		t.Fatalf("the first ODP RegMR under SIGURG every 100 µs (%d REG_MRs sent): %v", sent, err)
	}
	mr.Close()
	b, _ := json.Marshal(odpStorm{Sent: sent, Signals: signals})
	fmt.Printf("odpstorm %s\n", b)
}
