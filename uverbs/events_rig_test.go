package uverbs

import (
	"context"
	"errors"
	"flag"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/mmap"
)

var (
	evCQs        = flag.Int("events.cqs", 1000, "CQs (each with a waiting goroutine) in TestCQWaitersRig")
	evMaxThreads = flag.Int("events.maxthreads", 50, "OS threads TestCQWaitersRig allows while every CQ has a waiter")
)

// evTimeout bounds every wait for a completion or an event: the rig may
// run rxe under TCG, where a round trip costs milliseconds.
const evTimeout = 30 * time.Second

// evEnv is an open rxe device with a PD and a registered buffer, for
// loopback RC queue pairs addressed with a GRH.
type evEnv struct {
	ctx *Context
	pd  *PD
	gid [16]byte
	mem *mmap.Region
	mr  *MR
}

func newEvEnv(t *testing.T, name string) *evEnv {
	t.Helper()
	rigtest.Require(t)
	rigtest.Device(t, name)
	d, err := DeviceByName(name)
	if err != nil {
		t.Fatalf("DeviceByName(%s): %v", name, err)
	}
	return openEvEnv(t, d)
}

func openEvEnv(t *testing.T, d Device) *evEnv {
	t.Helper()
	ctx, err := Open(d)
	if err != nil {
		t.Fatalf("Open(%s): %v", d.Name, err)
	}
	t.Cleanup(func() { ctx.Close() })
	e := &evEnv{ctx: ctx}
	if e.pd, err = ctx.AllocPD(); err != nil {
		t.Fatalf("AllocPD: %v", err)
	}
	t.Cleanup(func() { e.pd.Close() })
	g, err := ctx.QueryGID(1, 1) // rxe: the IPv4-mapped RoCEv2 GID
	if err != nil {
		t.Fatalf("QueryGID(1, 1) on %s: %v", d.Name, err)
	}
	e.gid = g.GID
	if e.mem, err = mmap.Anonymous(64 << 10); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.mem.Close() })
	if e.mr, err = e.pd.RegMR(e.mem.Bytes(), AccessLocalWrite); err != nil {
		t.Fatalf("RegMR: %v", err)
	}
	t.Cleanup(func() { e.mr.Close() })
	return e
}

func (e *evEnv) sge(off, n int) []SGE {
	return []SGE{{Addr: uint64(e.mem.Addr()) + uint64(off), Length: uint32(n), LKey: e.mr.LKey()}}
}

func (e *evEnv) cq(t *testing.T, cqe int, ch *CompChannel) *CQ {
	t.Helper()
	cq, err := e.ctx.CreateCQ(cqe, CQOptions{Channel: ch})
	if err != nil {
		t.Fatalf("CreateCQ(%d): %v", cqe, err)
	}
	t.Cleanup(func() { cq.Close() })
	return cq
}

func (e *evEnv) channel(t *testing.T) *CompChannel {
	t.Helper()
	ch, err := e.ctx.CreateCompChannel()
	if err != nil {
		t.Fatalf("CreateCompChannel: %v", err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}

// rcQP creates an RC QP (in RESET) on send and recv CQs, with an SRQ or
// its own receive queue.
func (e *evEnv) rcQP(t *testing.T, scq, rcq *CQ, srq *SRQ, sendWR, recvWR uint32) *QP {
	t.Helper()
	init := QPInit{Type: QPTypeRC, SendCQ: scq, RecvCQ: rcq, SRQ: srq,
		Cap: QPCap{MaxSendWR: sendWR, MaxRecvWR: recvWR, MaxSendSGE: 1, MaxRecvSGE: 1}}
	if srq != nil {
		init.Cap.MaxRecvWR, init.Cap.MaxRecvSGE = 0, 0
	}
	qp, err := e.pd.CreateQP(init)
	if err != nil {
		t.Fatalf("CreateQP: %v", err)
	}
	t.Cleanup(func() { qp.Close() })
	return qp
}

// connect takes qp through INIT, RTR and RTS towards the QP numbered
// remote on the same device (loopback, with a GRH).
func (e *evEnv) connect(t *testing.T, qp *QP, remote uint32) {
	t.Helper()
	local := Endpoint{QPN: qp.QPN(), PSN: 0x10, GID: e.gid, GIDIndex: 1, Port: 1}
	if err := qp.Connect(local, Endpoint{QPN: remote, PSN: 0x10, GID: e.gid}, ConnectOptions{MTU: MTU1024, MinRNRTimer: 1}); err != nil {
		t.Fatalf("Connect QP %d: %v", qp.QPN(), err)
	}
}

// pair connects two RC QPs to each other.
func (e *evEnv) pair(t *testing.T, a, b *QP) {
	t.Helper()
	e.connect(t, a, b.QPN())
	e.connect(t, b, a.QPN())
}

func (e *evEnv) send(t *testing.T, qp *QP, id uint64) {
	t.Helper()
	if n, err := qp.PostSend([]SendWR{{ID: id, Opcode: WRSend, Flags: SendSignaled, SGL: e.sge(0, 64)}}); n != 1 || err != nil {
		t.Fatalf("PostSend on QP %d: %d, %v", qp.QPN(), n, err)
	}
}

func (e *evEnv) recv(t *testing.T, qp *QP, srq *SRQ, ids ...uint64) {
	t.Helper()
	wrs := make([]RecvWR, len(ids))
	for i, id := range ids {
		wrs[i] = RecvWR{ID: id, SGL: e.sge(4096, 64)}
	}
	var n int
	var err error
	if srq != nil {
		n, err = srq.PostRecv(wrs)
	} else {
		n, err = qp.PostRecv(wrs)
	}
	if n != len(wrs) || err != nil {
		t.Fatalf("PostRecv of %d: %d, %v", len(wrs), n, err)
	}
}

// osThreads is the Threads: line of /proc/self/status: the process's OS
// threads.
func osThreads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("/proc/self/status: %q", l)
			}
			return n
		}
	}
	t.Fatal("/proc/self/status has no Threads: line")
	return 0
}

// wakeup is what one CQ.Wait returned.
type wakeup struct {
	cq  int
	n   int
	wc  WorkCompletion
	err error
	at  time.Time
}

// TestCQWaitersRig parks one goroutine in CQ.Wait on each of 1,000 CQs
// (each with its own completion channel, then all on one shared channel),
// completes receives on a few of them through loopback RC QPs bound to
// those CQs, and checks that exactly their waiters wake, each with its
// own CQ's completion; that the others stay parked; that cancelling a
// waiter's context returns it at once; and that the process holds few OS
// threads while the 1,000 goroutines wait (logged, and at most
// -events.maxthreads).
func TestCQWaitersRig(t *testing.T) {
	for _, shared := range []bool{false, true} {
		name := "own-channels"
		if shared {
			name = "shared-channel"
		}
		t.Run(name, func(t *testing.T) { cqWaiters(t, shared) })
	}
}

func cqWaiters(t *testing.T, shared bool) {
	e := newEvEnv(t, "rxe0")
	n := *evCQs
	// The CQs whose waiters are woken, in two rounds (round 2 re-waits
	// round 1's and wakes some of them again).
	rounds := [][]int{{0, 1, n / 3, n / 2, n - 2, n - 1}, {1, 2, n / 2, 3 * n / 4}}

	t0 := osThreads(t)
	var chans []*CompChannel
	if shared {
		chans = []*CompChannel{e.channel(t)}
	}
	cqs := make([]*CQ, n)
	for i := range cqs {
		ch := (*CompChannel)(nil)
		if shared {
			ch = chans[0]
		} else {
			ch = e.channel(t)
			chans = append(chans, ch)
		}
		cqs[i] = e.cq(t, 4, ch)
	}
	// A receiving QP on each CQ that will be woken, each fed by its own
	// sending QP, whose completions go to one CQ without a channel.
	senderCQ := e.cq(t, 64, nil)
	recvQP, sendQP := map[int]*QP{}, map[int]*QP{}
	for _, r := range rounds {
		for _, i := range r {
			if recvQP[i] != nil {
				continue
			}
			recvQP[i] = e.rcQP(t, cqs[i], cqs[i], nil, 1, 8)
			sendQP[i] = e.rcQP(t, senderCQ, senderCQ, nil, 8, 1)
			e.pair(t, sendQP[i], recvQP[i])
			e.recv(t, recvQP[i], nil, uint64(1000+i), uint64(2000+i))
		}
	}
	t.Logf("%d CQs, %d completion channels, %d loopback QP pairs; %d OS threads before any waiter",
		n, len(chans), len(recvQP), t0)

	results := make(chan wakeup, n)
	cancels := make([]context.CancelFunc, n)
	waiting := make([]bool, n)
	startWaiter := func(i int) {
		if cancels[i] != nil {
			cancels[i]() // its Wait has returned
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i], waiting[i] = cancel, true
		go func() {
			wc := make([]WorkCompletion, 2)
			k, err := cqs[i].Wait(ctx, wc)
			results <- wakeup{cq: i, n: k, wc: wc[0], err: err, at: time.Now()}
		}()
	}
	defer func() {
		for _, c := range cancels {
			if c != nil {
				c()
			}
		}
	}()
	// Every waiter polls, arms its CQ (one REQ_NOTIFY_CQ write on the
	// command file each: counted there) and parks.
	armed := e.ctx.Syscalls()
	for i := range cqs {
		startWaiter(i)
	}
	deadline := time.Now().Add(evTimeout)
	for e.ctx.Syscalls()-armed < uint64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d CQs armed after %v", e.ctx.Syscalls()-armed, n, evTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	threads := osThreads(t)
	t.Logf("%d goroutines parked in CQ.Wait (%d goroutines in all): %d OS threads (GOMAXPROCS %d)",
		n, runtime.NumGoroutine(), threads, runtime.GOMAXPROCS(0))
	if threads >= *evMaxThreads {
		t.Errorf("%d OS threads while %d goroutines wait; want fewer than %d", threads, n, *evMaxThreads)
	}
	select {
	case w := <-results:
		t.Fatalf("CQ %d's waiter returned before any completion: %d, %v", w.cq, w.n, w.err)
	default:
	}

	woken := map[int]int{}
	for r, set := range rounds {
		if r > 0 {
			for _, i := range rounds[r-1] {
				startWaiter(i)
			}
			time.Sleep(200 * time.Millisecond)
		}
		sent := time.Now()
		want := map[int]bool{}
		for _, i := range set {
			want[i] = true
			e.send(t, sendQP[i], uint64(r))
		}
		got := map[int]bool{}
		var slowest time.Duration
		timer := time.NewTimer(evTimeout)
		for len(got) < len(set) {
			select {
			case w := <-results:
				switch {
				case !want[w.cq]:
					t.Errorf("round %d: CQ %d's waiter woke (%d, %v); only %v had completions", r+1, w.cq, w.n, w.err, set)
				case got[w.cq]:
					t.Errorf("round %d: CQ %d's waiter woke twice", r+1, w.cq)
				case w.err != nil || w.n != 1:
					t.Errorf("round %d: CQ %d: Wait = %d, %v; want 1 completion", r+1, w.cq, w.n, w.err)
				case w.wc.Status != WCSuccess || w.wc.Opcode != WCRecv || w.wc.QPNum != recvQP[w.cq].QPN() ||
					w.wc.ID != uint64(1000*(woken[w.cq]+1)+w.cq):
					t.Errorf("round %d: CQ %d returned %+v; want the receive %d of QP %d", r+1, w.cq, w.wc,
						1000*(woken[w.cq]+1)+w.cq, recvQP[w.cq].QPN())
				}
				got[w.cq], waiting[w.cq] = true, false
				woken[w.cq]++
				slowest = max(slowest, w.at.Sub(sent))
			case <-timer.C:
				t.Fatalf("round %d: after %v only %d of the %d waiters %v woke: %v", r+1, evTimeout, len(got), len(set), set, got)
			}
		}
		timer.Stop()
		// Nobody else wakes.
		select {
		case w := <-results:
			t.Errorf("round %d: CQ %d's waiter woke too (%d, %v)", r+1, w.cq, w.n, w.err)
		case <-time.After(300 * time.Millisecond):
		}
		t.Logf("round %d: %d waiters woke for their own CQs, the last %v after the sends", r+1, len(set), slowest.Round(time.Microsecond))
	}
	for i, cq := range cqs {
		if got := int(cq.Events()); got != woken[i] {
			t.Errorf("CQ %d consumed %d completion events, want %d", i, got, woken[i])
		}
	}
	// Drain the senders' completions: every send succeeded.
	wc := make([]WorkCompletion, 16)
	sends := 0
	for _, r := range rounds {
		sends += len(r)
	}
	for got, deadline := 0, time.Now().Add(evTimeout); got < sends; {
		k, err := senderCQ.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wc[:k] {
			if w.Status != WCSuccess {
				t.Errorf("send completion %+v", w)
			}
		}
		got += k
		if k == 0 && time.Now().After(deadline) {
			t.Fatalf("%d of %d send completions", got, sends)
		}
	}

	// Cancellation: one waiter, then all the others at once.
	one := -1
	for i := range waiting {
		if waiting[i] {
			one = i
			break
		}
	}
	start := time.Now()
	cancels[one]()
	select {
	case w := <-results:
		if w.cq != one || !errors.Is(w.err, context.Canceled) || w.n != 0 {
			t.Errorf("cancelled CQ %d's waiter: got CQ %d, %d, %v", one, w.cq, w.n, w.err)
		}
		waiting[w.cq] = false
		t.Logf("one cancelled waiter returned in %v", w.at.Sub(start).Round(time.Microsecond))
		if d := w.at.Sub(start); d > time.Second {
			t.Errorf("cancelled waiter returned after %v", d)
		}
	case <-time.After(evTimeout):
		t.Fatalf("cancelled waiter of CQ %d did not return", one)
	}
	left := 0
	for i := range waiting {
		if waiting[i] {
			left++
		}
	}
	start = time.Now()
	for _, c := range cancels {
		c()
	}
	var last time.Time
	for k := 0; k < left; k++ {
		select {
		case w := <-results:
			if !errors.Is(w.err, context.Canceled) || w.n != 0 || !waiting[w.cq] {
				t.Errorf("CQ %d's waiter after cancel: %d, %v", w.cq, w.n, w.err)
			}
			waiting[w.cq] = false
			last = w.at
		case <-time.After(evTimeout):
			t.Fatalf("%d of %d cancelled waiters returned", k, left)
		}
	}
	d := last.Sub(start)
	t.Logf("%d cancelled waiters all returned in %v; %d OS threads now", left, d.Round(time.Microsecond), osThreads(t))
	if d > 5*time.Second {
		t.Errorf("cancelling %d waiters took %v", left, d)
	}
}
