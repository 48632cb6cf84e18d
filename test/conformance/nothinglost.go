package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/goverbs/goverbs/uverbs"
)

// lossPair is one RC pair of the NothingLost test: a sends, b receives.
type lossPair struct {
	a, b        *end
	fails       bool // forced to ERR halfway
	failed      bool
	sends       []uint8 // completions seen, by sequence number
	recvs       []uint8
	postedSends int
	postedRecvs int
	doneSends   int
	doneRecvs   int
	flushed     int
	refused     bool // iWARP: a failed pair refuses new requests
}

const (
	lossKindRecv uint64 = 1 << 40 // a uint64: past a 32-bit int
	lossBatch           = 8
)

func lossID(pair int, kind uint64, seq int) uint64 { return uint64(pair)<<32 | kind | uint64(seq) }

// testNothingLost posts many work requests over several QP pairs, forces
// half of the pairs to the error state midway, and checks that every
// request completes exactly once: successfully, or (on a failed pair) with
// a flush error.
func testNothingLost(t *testing.T, e *env) {
	const pairs = 4
	total := e.o.NothingLostWRs
	perPair := total / pairs / 2 // sends per pair; as many receives
	if perPair < 2*lossBatch {
		perPair = 2 * lossBatch
	}
	cp := uverbs.QPCap{MaxSendWR: 64, MaxRecvWR: 128, MaxSendSGE: 1, MaxRecvSGE: 1}
	ps := make([]*lossPair, pairs)
	for i := range ps {
		a, b := e.pair(t, qpConfig{cap: cp, cqe: 512})
		ps[i] = &lossPair{a: a, b: b, fails: i%2 == 1, sends: make([]uint8, perPair), recvs: make([]uint8, perPair)}
	}
	sendWRs := make([]uverbs.SendWR, lossBatch)
	recvWRs := make([]uverbs.RecvWR, lossBatch)
	wc := make([]uverbs.WorkCompletion, 64)
	start := time.Now()
	lastProgress := time.Now()
	var completions, posted int

	record := func(p *lossPair, pi int, w uverbs.WorkCompletion) {
		kind := w.ID & lossKindRecv
		seq := int(w.ID & 0xffffffff)
		if int(w.ID>>32&0xff) != pi || seq >= perPair {
			t.Fatalf("pair %d: completion for a request never posted: %s", pi, fmtWC(w))
		}
		counts := p.sends
		if kind != 0 {
			counts = p.recvs
		}
		counts[seq]++
		if counts[seq] > 1 {
			t.Fatalf("pair %d: second completion for request %#x: %s", pi, w.ID, fmtWC(w))
		}
		switch {
		case w.Status == uverbs.WCSuccess:
		case w.Status == uverbs.WCWRFlushErr && p.failed:
			p.flushed++
		default:
			t.Fatalf("pair %d (failed %v): completion %s", pi, p.failed, fmtWC(w))
		}
		if kind != 0 {
			p.doneRecvs++
		} else {
			p.doneSends++
		}
		completions++
		lastProgress = time.Now()
	}
	drain := func(pi int, p *lossPair) {
		for _, cq := range []*uverbs.CQ{p.a.cq, p.b.cq} {
			for {
				n, err := cq.Poll(wc)
				if err != nil {
					t.Fatalf("Poll: %v", err)
				}
				for _, w := range wc[:n] {
					record(p, pi, w)
				}
				if n < len(wc) {
					break
				}
			}
		}
	}

	for {
		busy := false
		before := posted + completions
		for pi, p := range ps {
			drain(pi, p)
			// Halfway, a failing pair goes to ERR: the sender first, so no
			// request of it is left retrying against a dead receiver.
			if p.fails && !p.failed && p.postedSends >= perPair/2 {
				toError(t, p.a.qp)
				toError(t, p.b.qp)
				p.failed = true
			}
			if p.failed && e.o.IWARP && !p.refused {
				// siw flushes only on entering ERR: what a failed
				// pair is given now must be refused, not lost.
				if n, err := p.b.qp.PostRecv([]uverbs.RecvWR{{ID: lossID(pi, lossKindRecv, p.postedRecvs)}}); n != 0 || err == nil {
					t.Fatalf("pair %d in ERR: PostRecv = %d, %v; want a refusal", pi, n, err)
				}
				if n, err := p.a.qp.PostSend([]uverbs.SendWR{{ID: lossID(pi, 0, p.postedSends), Opcode: uverbs.WRSend}}); n != 0 || err == nil {
					t.Fatalf("pair %d in ERR: PostSend = %d, %v; want a refusal", pi, n, err)
				}
				p.refused = true
			}
			if p.postedSends < perPair && !p.refused {
				busy = true
				k := min(lossBatch, perPair-p.postedSends)
				// Room for the batch on both sides first, then receives
				// before sends. A failed pair keeps posting both: they
				// must be flushed.
				if p.postedSends-p.doneSends+k > int(cp.MaxSendWR) || p.postedRecvs-p.doneRecvs+k > int(cp.MaxRecvWR) {
					continue
				}
				for j := range k {
					recvWRs[j] = uverbs.RecvWR{ID: lossID(pi, lossKindRecv, p.postedRecvs+j), SGL: []uverbs.SGE{p.b.buf.sge(j*64, 64)}}
				}
				postRecv(t, p.b.qp, recvWRs[:k]...)
				p.postedRecvs += k
				posted += k
				for j := range k {
					sendWRs[j] = uverbs.SendWR{ID: lossID(pi, 0, p.postedSends+j), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
						SGL: []uverbs.SGE{p.a.buf.sge(j*64, 32)}}
				}
				post(t, p.a.qp, sendWRs[:k]...)
				p.postedSends += k
				posted += k
			} else if p.doneSends < p.postedSends || p.doneRecvs < p.postedRecvs {
				busy = true
			}
		}
		if !busy {
			break
		}
		if posted+completions == before {
			time.Sleep(20 * time.Microsecond) // let the kernel's workers run
		}
		if time.Since(lastProgress) > e.o.Timeout {
			var s string
			for pi, p := range ps {
				s += fmt.Sprintf("\n  pair %d (failed %v): sends %d/%d, receives %d/%d", pi, p.failed, p.doneSends, p.postedSends, p.doneRecvs, p.postedRecvs)
			}
			t.Fatalf("no completion for %v; %d of %d posted requests completed:%s", e.o.Timeout, completions, posted, s)
		}
	}
	el := time.Since(start)
	flushed := 0
	for pi, p := range ps {
		for seq := range p.postedSends {
			if p.sends[seq] != 1 {
				t.Errorf("pair %d send %d: %d completions", pi, seq, p.sends[seq])
			}
		}
		for seq := range p.postedRecvs {
			if p.recvs[seq] != 1 {
				t.Errorf("pair %d receive %d: %d completions", pi, seq, p.recvs[seq])
			}
		}
		flushed += p.flushed
	}
	t.Logf("%d work requests over %d QP pairs (%d forced to ERR halfway): %d completions, %d of them flushed, in %v (%.0f requests/s)",
		posted, pairs, pairs/2, completions, flushed, el.Round(time.Millisecond), float64(posted)/el.Seconds())
	if completions != posted {
		t.Errorf("%d completions for %d requests", completions, posted)
	}
}
