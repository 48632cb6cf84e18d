// Package verbsbench holds the fast-path benchmarks every provider runs in
// the rig on a connected RC pair (provider/rxe and provider/siw, each
// connecting its pair its own way: MODIFY_QP on rxe, rdma_cm on siw). Each
// reports allocations and syscalls per operation (the contexts' counters).
//
// It imports uverbs only; its callers are tests.
package verbsbench

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/goverbs/goverbs/uverbs"
)

// End is one side of a connected RC pair.
type End struct {
	Ctx *uverbs.Context // whose Syscalls count this side's calls
	QP  *uverbs.QP
	CQ  *uverbs.CQ // the QP's send and receive CQ
	Buf []byte     // registered as MR, for local and remote access
	MR  *uverbs.MR
}

// SGE is n bytes of the buffer at off.
func (e *End) SGE(off, n int) uverbs.SGE {
	return uverbs.SGE{Addr: e.MR.Addr() + uint64(off), Length: uint32(n), LKey: e.MR.LKey()}
}

// Pair is two connected ends: A sends, B receives and is the RDMA target.
// An end may share its context with the other.
type Pair struct{ A, B *End }

// syscalls is what the pair's contexts counted (a context both ends share
// counted once).
func (p Pair) syscalls() uint64 {
	n := p.A.Ctx.Syscalls()
	if p.B.Ctx != p.A.Ctx {
		n += p.B.Ctx.Syscalls()
	}
	return n
}

// reapTimeout is how long Reap waits with nothing coming before it fails.
const reapTimeout = 60 * time.Second

// poll polls cq once into wc, failing on an error or an error status.
func poll(b testing.TB, cq *uverbs.CQ, wc []uverbs.WorkCompletion) int {
	k, err := cq.Poll(wc)
	if err != nil {
		b.Fatal(err)
	}
	for _, w := range wc[:k] {
		if w.Status != uverbs.WCSuccess {
			b.Fatalf("completion %+v", w)
		}
	}
	return k
}

// Reap polls cq until n completions came, failing on an error status or
// after reapTimeout without one.
func Reap(b testing.TB, cq *uverbs.CQ, wc []uverbs.WorkCompletion, n int) {
	b.Helper()
	var idle time.Time
	for n > 0 {
		k := poll(b, cq, wc[:min(n, len(wc))])
		n -= k
		switch {
		case k > 0:
			idle = time.Time{}
		case idle.IsZero():
			idle = time.Now()
		case time.Since(idle) > reapTimeout:
			b.Fatalf("%d completions missing after %v", n, reapTimeout)
		}
	}
}

func reportSyscalls(b *testing.B, syscalls uint64, ops int) {
	b.ReportMetric(float64(syscalls)/float64(ops), "syscalls/op")
}

// PostSend: 8-byte RDMA WRITEs in lists of list (one PostSend call each),
// every 16th signaled, at most depth in flight (A's send queue must hold
// depth); the completions are reaped inside the timing, as a streaming
// sender does. An op is one work request.
func PostSend(b *testing.B, p Pair, depth, list int) {
	const every = 16
	wrs := make([]uverbs.SendWR, list)
	for i := range wrs {
		wrs[i] = uverbs.SendWR{Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{p.A.SGE(0, 8)}, RemoteAddr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}
	}
	wc := make([]uverbs.WorkCompletion, 16)
	b.ReportAllocs()
	before := p.A.Ctx.Syscalls()
	b.ResetTimer()
	n, signaled := 0, 0 // posted; signaled requests not yet reaped
	for n < b.N {
		for signaled*every+list > depth-every {
			signaled -= poll(b, p.A.CQ, wc)
		}
		for i := range wrs {
			wrs[i].Flags = 0
			if (n+i)%every == every-1 {
				wrs[i].Flags = uverbs.SendSignaled
				signaled++
			}
		}
		if _, err := p.A.QP.PostSend(wrs); err != nil {
			b.Fatal(err)
		}
		n += list
	}
	Reap(b, p.A.CQ, wc, signaled)
	b.StopTimer()
	reportSyscalls(b, p.A.Ctx.Syscalls()-before, n)
}

// PostRecv: one receive per call on B (whose receive queue must hold
// depth); when the queue is full, A's SENDs consume it outside the timing.
func PostRecv(b *testing.B, p Pair, depth int) {
	recv := []uverbs.RecvWR{{SGL: []uverbs.SGE{p.B.SGE(0, 64)}}}
	send := []uverbs.SendWR{{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{p.A.SGE(0, 8)}}}
	wc := make([]uverbs.WorkCompletion, 64)
	drain := func(k int) {
		for range k {
			if _, err := p.A.QP.PostSend(send); err != nil {
				b.Fatal(err)
			}
		}
		Reap(b, p.A.CQ, wc, k)
		Reap(b, p.B.CQ, wc, k)
	}
	b.ReportAllocs()
	var syscalls uint64
	posted := 0
	b.ResetTimer()
	for i := range b.N {
		if posted == depth {
			b.StopTimer()
			drain(posted)
			posted = 0
			b.StartTimer()
		}
		before := p.B.Ctx.Syscalls()
		recv[0].ID = uint64(i)
		if _, err := p.B.QP.PostRecv(recv); err != nil {
			b.Fatal(err)
		}
		syscalls += p.B.Ctx.Syscalls() - before
		posted++
	}
	b.StopTimer()
	drain(posted)
	reportSyscalls(b, syscalls, b.N)
}

// PollCQ: one completion per Poll call on A's CQ, which signaled WRITEs
// fill (depth-1 at a time, A's send queue and CQ must hold them) outside
// the timing.
func PollCQ(b *testing.B, p Pair, depth int) {
	wr := []uverbs.SendWR{{Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{p.A.SGE(0, 8)},
		RemoteAddr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}}
	wc := make([]uverbs.WorkCompletion, 1)
	b.ReportAllocs()
	var syscalls uint64
	left := 0
	b.ResetTimer()
	for range b.N {
		if left == 0 {
			b.StopTimer()
			for range depth - 1 {
				if _, err := p.A.QP.PostSend(wr); err != nil {
					b.Fatal(err)
				}
			}
			time.Sleep(20 * time.Millisecond) // let the kernel complete them
			left = depth - 1
			b.StartTimer()
		}
		before := p.A.Ctx.Syscalls()
		for {
			n, err := p.A.CQ.Poll(wc)
			if err != nil || (n == 1 && wc[0].Status != uverbs.WCSuccess) {
				b.Fatal(err, wc[0])
			}
			if n == 1 {
				break
			}
			// Not there yet (the kernel is still completing the fill):
			// wait for it outside the timing.
			b.StopTimer()
			time.Sleep(time.Millisecond)
			b.StartTimer()
		}
		syscalls += p.A.Ctx.Syscalls() - before
		left--
	}
	b.StopTimer()
	Reap(b, p.A.CQ, make([]uverbs.WorkCompletion, 64), left)
	reportSyscalls(b, syscalls, b.N)
}

// PollCQEmpty: the cost of finding nothing on A's idle CQ.
func PollCQEmpty(b *testing.B, p Pair) {
	wc := make([]uverbs.WorkCompletion, 16)
	b.ReportAllocs()
	before := p.A.Ctx.Syscalls()
	b.ResetTimer()
	for range b.N {
		if n, err := p.A.CQ.Poll(wc); n != 0 || err != nil {
			b.Fatalf("Poll of an idle CQ = %d, %v", n, err)
		}
	}
	b.StopTimer()
	reportSyscalls(b, p.A.Ctx.Syscalls()-before, b.N)
}

// PingPong: an 8-byte SEND from A to B and back, each side busy-polling
// its CQ; one op is a round trip. latency-ns is half of it. Both queues
// must hold two receives and the sends not yet reaped.
func PingPong(b *testing.B, p Pair) {
	recvA := []uverbs.RecvWR{{SGL: []uverbs.SGE{p.A.SGE(4096, 64)}}}
	recvB := []uverbs.RecvWR{{SGL: []uverbs.SGE{p.B.SGE(4096, 64)}}}
	sendA := []uverbs.SendWR{{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{p.A.SGE(0, 8)}}}
	sendB := []uverbs.SendWR{{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{p.B.SGE(0, 8)}}}
	wc := make([]uverbs.WorkCompletion, 4)
	// Each side's CQ gets its receive completions and its own send
	// completions; waitRecv returns at the next receive and counts the
	// sends it passes.
	sendsDone := map[*End]int{}
	waitRecv := func(e *End) {
		for {
			n, err := e.CQ.Poll(wc[:1])
			if err != nil {
				b.Fatal(err)
			}
			if n == 0 {
				continue
			}
			if wc[0].Status != uverbs.WCSuccess {
				b.Fatalf("completion %+v", wc[0])
			}
			if wc[0].Opcode == uverbs.WCRecv {
				return
			}
			sendsDone[e]++
		}
	}
	if _, err := p.A.QP.PostRecv(recvA); err != nil {
		b.Fatal(err)
	}
	if _, err := p.B.QP.PostRecv(recvB); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	before := p.syscalls()
	start := time.Now()
	b.ResetTimer()
	for i := range b.N {
		binary.NativeEndian.PutUint64(p.A.Buf, uint64(i))
		if _, err := p.A.QP.PostSend(sendA); err != nil {
			b.Fatal(err)
		}
		waitRecv(p.B)
		if _, err := p.B.QP.PostRecv(recvB); err != nil {
			b.Fatal(err)
		}
		if _, err := p.B.QP.PostSend(sendB); err != nil {
			b.Fatal(err)
		}
		waitRecv(p.A)
		if _, err := p.A.QP.PostRecv(recvA); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	el := time.Since(start)
	Reap(b, p.A.CQ, wc, b.N-sendsDone[p.A])
	Reap(b, p.B.CQ, wc, b.N-sendsDone[p.B])
	b.ReportMetric(float64(el.Nanoseconds())/float64(b.N)/2, "latency-ns")
	reportSyscalls(b, p.syscalls()-before, b.N)
}

// MessageRate: a stream of 8-byte SENDs from A in lists of list, the last
// of each signaled, with B's receives kept posted; at most depth in flight
// (both queues must hold depth). An op is one message; msgs/s is the rate.
func MessageRate(b *testing.B, p Pair, depth, list int) {
	sends := make([]uverbs.SendWR, list)
	recvs := make([]uverbs.RecvWR, list)
	for i := range sends {
		sends[i] = uverbs.SendWR{Opcode: uverbs.WRSend, SGL: []uverbs.SGE{p.A.SGE(i*8, 8)}}
		recvs[i] = uverbs.RecvWR{SGL: []uverbs.SGE{p.B.SGE(i*64, 64)}}
	}
	sends[list-1].Flags = uverbs.SendSignaled
	wc := make([]uverbs.WorkCompletion, 64)
	for range depth / list {
		if _, err := p.B.QP.PostRecv(recvs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	before := p.syscalls()
	start := time.Now()
	b.ResetTimer()
	sent, inflight := 0, 0
	for sent < b.N {
		if inflight+list <= depth {
			if _, err := p.A.QP.PostSend(sends); err != nil {
				b.Fatal(err)
			}
			sent += list
			inflight += list
		}
		n, err := p.B.CQ.Poll(wc)
		if err != nil {
			b.Fatal(err)
		}
		inflight -= n
		for k := n; k > 0; k -= min(k, list) {
			if _, err := p.B.QP.PostRecv(recvs[:min(k, list)]); err != nil {
				b.Fatal(err)
			}
		}
		poll(b, p.A.CQ, wc)
	}
	for inflight > 0 {
		n, _ := p.B.CQ.Poll(wc)
		inflight -= n
	}
	b.StopTimer()
	el := time.Since(start)
	b.ReportMetric(float64(sent)/el.Seconds(), "msgs/s")
	reportSyscalls(b, p.syscalls()-before, sent)
}
