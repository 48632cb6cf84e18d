package lifetest

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// StressOptions shape Stress.
type StressOptions struct {
	AH     uverbs.AHAttr // the device's own address (loopback RC pairs)
	QPs    int           // queue pairs, in loopback pairs (16)
	CQs    int           // CQs the QPs share (4)
	Rounds int           // teardown points: one context per round
	// WRs is the least number of work requests the rounds must post:
	// rounds go on past Rounds until it is reached (at most ten times
	// Rounds; more is a failure: the posters are stuck).
	WRs int64
	// MaxDelay bounds the random moment of the round's teardown.
	MaxDelay time.Duration
	// KeptFDsPerRound are descriptors the device side keeps per round (the
	// mlx5 model holds its end of each completion channel until the
	// modelled device closes; the kernel holds none).
	KeptFDsPerRound int
	// Connect, if set, connects each loopback pair (a dialing, b
	// accepting) instead of MODIFY_QP (iWARP: through rdma_cm); the
	// returned func closes the connection at the end of the round.
	Connect func(t *testing.T, a, b *uverbs.QP) func()
	// Refusals are PostSend errors that count as a refusal like
	// ErrClosed: on siw a QP whose peer went away is refused by the
	// provider once rdma_cm moved it to ERR (EINVAL), or by the kernel's
	// doorbell before that (ENOTCONN).
	Refusals []error
}

// refused reports whether err is one of o.Refusals.
func (o *StressOptions) refused(err error) bool {
	for _, r := range o.Refusals {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}

// wrID packs a QP index and a sequence number.
func wrID(qp, seq int) uint64 { return uint64(qp)<<32 | uint64(seq) }

// Stress runs rounds (o.Rounds, and more until o.WRs were posted) of traffic on QPs loopback-connected in pairs, with a
// poster per QP and a waiter per CQ (CQ.Wait, which polls), while a closer
// goroutine closes QPs, CQs, the channel and the context at random
// moments. Every round must end with every goroutine returned (none left
// parked), no WR completed twice or completed without having been posted,
// every verb's error either ErrClosed or a documented refusal (EBUSY from a
// CQ still in use), and, after the rounds, no descriptor or device mapping
// left.
func Stress(t *testing.T, dev uverbs.Device, o StressOptions) {
	fds, maps := countFDs(t), countDeviceMaps(t)
	var posted, completed, flushed, refused atomic.Int64
	round := 0
	for ; round < o.Rounds || posted.Load() < o.WRs; round++ {
		if round == 10*max(o.Rounds, 1) {
			t.Fatalf("%d rounds posted only %d WRs, want %d", round, posted.Load(), o.WRs)
		}
		stressRound(t, dev, o, round, &posted, &completed, &flushed, &refused)
		if t.Failed() {
			return
		}
	}
	t.Logf("%d rounds: %d WRs posted, %d completed (%d flushed), %d posts refused as closed",
		round, posted.Load(), completed.Load(), flushed.Load(), refused.Load())
	// A leak is a rise. The count may also fall: descriptors an earlier
	// test left to the garbage collector can be closed during the rounds.
	if got, want := countFDs(t), fds+round*o.KeptFDsPerRound; got > want {
		t.Errorf("open descriptors %d → %d, want at most %d", fds, got, want)
	}
	if got := countDeviceMaps(t); got != maps {
		t.Errorf("device mappings %d → %d", maps, got)
	}
}

func stressRound(t *testing.T, dev uverbs.Device, o StressOptions, round int, posted, completed, flushed, refused *atomic.Int64) {
	c, err := uverbs.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	region, err := mmap.Anonymous(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer region.Close()
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	all := uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead
	mr, err := pd.RegMR(region.Bytes(), all)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	cqs := make([]*uverbs.CQ, o.CQs)
	for i := range cqs {
		if cqs[i], err = c.CreateCQ(1024, uverbs.CQOptions{Channel: ch}); err != nil {
			t.Fatal(err)
		}
	}
	const depth = 16
	qps := make([]*uverbs.QP, o.QPs)
	for i := range qps {
		cq := cqs[i%len(cqs)]
		if qps[i], err = pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
			Cap: uverbs.QPCap{MaxSendWR: depth, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i+1 < len(qps); i += 2 {
		if o.Connect != nil {
			defer o.Connect(t, qps[i], qps[i+1])()
			continue
		}
		rts(t, qps[i], qps[i+1].QPN(), o.AH)
		rts(t, qps[i+1], qps[i].QPN(), o.AH)
	}

	var mu sync.Mutex
	seen := map[uint64]int{}
	outstanding := make([]atomic.Int32, len(qps))
	postedIDs := make([]atomic.Int64, len(qps)) // sequence numbers reserved per QP
	fail := func(format string, args ...any) {
		t.Errorf("round %d: "+format, append([]any{round}, args...)...)
	}
	okErr := func(verb string, err error) {
		if err != nil && !errors.Is(err, uverbs.ErrClosed) {
			fail("%s: %v, want ErrClosed", verb, err)
		}
	}

	stop := make(chan struct{}) // closed once the context is closed
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i, qp := range qps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sge := []uverbs.SGE{{Addr: uint64(region.Addr()) + uint64(i)*64, Length: 64, LKey: mr.LKey()}}
			for ctx.Err() == nil {
				if outstanding[i].Load() >= depth {
					// Full: the completions may never come (the CQ or the
					// context closed); the closer says when to stop.
					select {
					case <-stop:
						return
					case <-time.After(50 * time.Microsecond):
					}
					continue
				}
				seq := int(postedIDs[i].Add(1) - 1) // reserved before the post: its completion may come first
				wr := []uverbs.SendWR{{ID: wrID(i, seq), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, SGL: sge,
					RemoteAddr: uint64(region.Addr()) + 32768 + uint64(i)*64, RKey: mr.RKey()}}
				outstanding[i].Add(1)
				n, err := qp.PostSend(wr)
				if n == 1 {
					posted.Add(1)
				} else {
					outstanding[i].Add(-1)
				}
				if err != nil {
					if errors.Is(err, uverbs.ErrClosed) || o.refused(err) {
						refused.Add(1)
					} else {
						fail("PostSend on QP %d: %v", i, err)
					}
					return
				}
			}
		}()
	}
	for _, cq := range cqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wc := make([]uverbs.WorkCompletion, 32)
			for {
				n, err := cq.Wait(ctx, wc)
				for _, w := range wc[:n] {
					qp, seq := int(w.ID>>32), int(uint32(w.ID))
					mu.Lock()
					seen[w.ID]++
					twice := seen[w.ID] > 1
					mu.Unlock()
					switch {
					case twice:
						fail("WR %d/%d completed twice", qp, seq)
					case qp >= len(qps) || int64(seq) >= postedIDs[qp].Load():
						fail("completion %+v for a WR never posted", w)
					}
					if qp < len(qps) {
						outstanding[qp].Add(-1)
					}
					completed.Add(1)
					if w.Status != uverbs.WCSuccess {
						flushed.Add(1)
					}
				}
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						okErr("CQ.Wait", err)
					}
					return
				}
			}
		}()
	}

	// The closer: a few QPs, maybe a CQ (EBUSY while its QPs live), maybe
	// the channel, then the context, at random moments.
	r := rand.New(rand.NewPCG(uint64(round), 7))
	sleep := func() { time.Sleep(time.Duration(r.Int64N(int64(o.MaxDelay) + 1))) }
	sleep()
	for k := r.IntN(len(qps) + 1); k > 0; k-- {
		okErr("QP.Close", qps[r.IntN(len(qps))].Close())
	}
	if r.IntN(2) == 0 {
		if err := cqs[r.IntN(len(cqs))].Close(); err != nil && !errors.Is(err, unix.EBUSY) {
			fail("CQ.Close: %v (want nil or EBUSY)", err)
		}
	}
	if r.IntN(3) == 0 {
		okErr("CompChannel.Close", ch.Close())
	}
	sleep()
	if err := c.Close(); err != nil {
		fail("Context.Close: %v", err)
	}
	close(stop)
	// Everything must return: posters see ErrClosed, waiters are woken.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		buf := make([]byte, 1<<20)
		fail("goroutines still parked 20 s after Context.Close:\n%s", buf[:runtime.Stack(buf, true)])
		cancel()
		<-done
	}
	for _, q := range qps {
		okErr("QP.Close after Context.Close", q.Close())
	}
	for _, cq := range cqs {
		okErr("CQ.Close after Context.Close", cq.Close())
	}
	okErr("MR.Close after Context.Close", mr.Close())
	okErr("PD.Close after Context.Close", pd.Close())
	okErr("CompChannel.Close after Context.Close", ch.Close())
}

// rts takes an RC QP to RTS, connected to remote over av.
func rts(t *testing.T, q *uverbs.QP, remote uint32, av uverbs.AHAttr) {
	t.Helper()
	steps := []struct {
		a    uverbs.QPAttr
		mask uverbs.QPAttrMask
	}{
		{uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead},
			uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrAccessFlags},
		{uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: uverbs.MTU1024, DestQPN: remote, MaxDestRDAtomic: 1, MinRNRTimer: 12, AH: av},
			uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN |
				uverbs.QPAttrMaxDestRDAtomic | uverbs.QPAttrMinRNRTimer},
		{uverbs.QPAttr{State: uverbs.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: 1},
			uverbs.QPAttrState | uverbs.QPAttrSQPSN | uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry | uverbs.QPAttrMaxQPRDAtomic},
	}
	for _, s := range steps {
		if err := q.Modify(&s.a, s.mask); err != nil {
			t.Fatalf("Modify QP %d to %v: %v", q.QPN(), s.a.State, err)
		}
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// countDeviceMaps counts this process's mappings of uverbs files (the
// queues and doorbell pages a provider maps).
func countDeviceMaps(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "/dev/infiniband/")
}
