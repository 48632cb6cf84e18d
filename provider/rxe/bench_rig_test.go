package rxe_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/uverbs"
)

// Benchmarks on rxe0 in the rig (a real kernel, under TCG: absolute times
// are the emulator's, ratios are what matter). Each reports syscalls per
// operation from the command file's counter, and allocations.
//
//	test/rig/run.sh --bin DIR -- 'rxe.test -test.run NONE -test.bench . -test.benchtime 2000x'

// benchEnd is one side of a loopback RC pair.
type benchEnd struct {
	qp  *uverbs.QP
	cq  *uverbs.CQ
	buf *mmap.Region
	mr  *uverbs.MR
}

func (e *benchEnd) sge(off, n int) uverbs.SGE {
	return uverbs.SGE{Addr: uint64(e.buf.Addr()) + uint64(off), Length: uint32(n), LKey: e.mr.LKey()}
}

type benchPair struct {
	ctx  *uverbs.Context
	a, b *benchEnd
}

// newBenchPair connects two RC QPs of rxe0 to each other.
func newBenchPair(b *testing.B, cp uverbs.QPCap) *benchPair {
	b.Helper()
	dev := rigDevice(b, "rxe0")
	ctx, err := uverbs.Open(dev)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ctx.Close() })
	pd, err := ctx.AllocPD()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pd.Close() })
	ent, err := ctx.QueryGID(1, 1)
	if err != nil {
		b.Fatal(err)
	}
	gid := ent.GID
	mk := func() *benchEnd {
		cq, err := ctx.CreateCQ(int(2*(cp.MaxSendWR+cp.MaxRecvWR)), uverbs.CQOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cq.Close() })
		qp, err := pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: cp})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { qp.Close() })
		buf, err := mmap.Anonymous(1 << 16)
		if err != nil {
			b.Fatal(err)
		}
		mr, err := pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { mr.Close(); buf.Close() })
		return &benchEnd{qp: qp, cq: cq, buf: buf, mr: mr}
	}
	p := &benchPair{ctx: ctx, a: mk(), b: mk()}
	connect := func(qp *uverbs.QP, remote uint32) {
		steps := []struct {
			a    uverbs.QPAttr
			mask uverbs.QPAttrMask
		}{
			{uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead},
				uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrAccessFlags},
			{uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: uverbs.MTU1024, DestQPN: remote, RQPSN: 0, MaxDestRDAtomic: 1, MinRNRTimer: 1,
				AH: uverbs.AHAttr{PortNum: 1, GRH: &uverbs.GlobalRoute{DGID: gid, SGIDIndex: 1, HopLimit: 64}}},
				uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN |
					uverbs.QPAttrMaxDestRDAtomic | uverbs.QPAttrMinRNRTimer},
			{uverbs.QPAttr{State: uverbs.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: 1},
				uverbs.QPAttrState | uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry | uverbs.QPAttrSQPSN | uverbs.QPAttrMaxQPRDAtomic},
		}
		for _, s := range steps {
			if err := qp.Modify(&s.a, s.mask); err != nil {
				b.Fatalf("Modify to %v: %v", s.a.State, err)
			}
		}
	}
	connect(p.a.qp, p.b.qp.QPN())
	connect(p.b.qp, p.a.qp.QPN())
	return p
}

// reap polls cq until n completions came, failing on an error status.
func reap(b *testing.B, cq *uverbs.CQ, wc []uverbs.WorkCompletion, n int) {
	deadline := time.Time{}
	for n > 0 {
		k, err := cq.Poll(wc[:min(n, len(wc))])
		if err != nil {
			b.Fatal(err)
		}
		for _, w := range wc[:k] {
			if w.Status != uverbs.WCSuccess {
				b.Fatalf("completion %+v", w)
			}
		}
		n -= k
		if k == 0 {
			if deadline.IsZero() {
				deadline = time.Now().Add(30 * time.Second)
			} else if time.Now().After(deadline) {
				b.Fatalf("%d completions missing after 30 s", n)
			}
		}
	}
}

func reportSyscalls(b *testing.B, ctx *uverbs.Context, before uint64, ops int) {
	b.ReportMetric(float64(ctx.Syscalls()-before)/float64(ops), "syscalls/op")
}

// BenchmarkPostSend: one 8-byte RDMA WRITE per PostSend call, every 16th
// signaled, up to 64 in flight; the completions are reaped inside the
// timing, as a streaming sender does.
func BenchmarkPostSend(b *testing.B) { benchPostSend(b, 1) }

// BenchmarkPostSendList8: lists of eight WRITEs, one doorbell each; an op
// is one work request.
func BenchmarkPostSendList8(b *testing.B) { benchPostSend(b, 8) }

func benchPostSend(b *testing.B, list int) {
	const depth, every = 64, 16
	p := newBenchPair(b, uverbs.QPCap{MaxSendWR: depth, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	wrs := make([]uverbs.SendWR, list)
	for i := range wrs {
		wrs[i] = uverbs.SendWR{Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{p.a.sge(0, 8)}, RemoteAddr: uint64(p.b.buf.Addr()), RKey: p.b.mr.RKey()}
	}
	wc := make([]uverbs.WorkCompletion, 16)
	b.ReportAllocs()
	before := p.ctx.Syscalls()
	b.ResetTimer()
	n, signaled := 0, 0 // posted; signaled requests not yet reaped
	for n < b.N {
		for signaled*every+list > depth-every {
			k, err := p.a.cq.Poll(wc)
			if err != nil {
				b.Fatal(err)
			}
			for _, w := range wc[:k] {
				if w.Status != uverbs.WCSuccess {
					b.Fatalf("completion %+v", w)
				}
			}
			signaled -= k
		}
		for i := range wrs {
			wrs[i].Flags = 0
			if (n+i)%every == every-1 {
				wrs[i].Flags = uverbs.SendSignaled
				signaled++
			}
		}
		if _, err := p.a.qp.PostSend(wrs); err != nil {
			b.Fatal(err)
		}
		n += list
	}
	reap(b, p.a.cq, wc, signaled)
	b.StopTimer()
	reportSyscalls(b, p.ctx, before, n)
}

// BenchmarkPostRecv: one receive per call; when the queue is full the peer
// consumes it outside the timing.
func BenchmarkPostRecv(b *testing.B) {
	const depth = 256
	p := newBenchPair(b, uverbs.QPCap{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1})
	recv := []uverbs.RecvWR{{SGL: []uverbs.SGE{p.b.sge(0, 64)}}}
	send := []uverbs.SendWR{{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{p.a.sge(0, 8)}}}
	wc := make([]uverbs.WorkCompletion, 64)
	drain := func(k int) {
		for range k {
			if _, err := p.a.qp.PostSend(send); err != nil {
				b.Fatal(err)
			}
		}
		reap(b, p.a.cq, wc, k)
		reap(b, p.b.cq, wc, k)
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
		before := p.ctx.Syscalls()
		recv[0].ID = uint64(i)
		if _, err := p.b.qp.PostRecv(recv); err != nil {
			b.Fatal(err)
		}
		syscalls += p.ctx.Syscalls() - before
		posted++
	}
	b.StopTimer()
	drain(posted)
	b.ReportMetric(float64(syscalls)/float64(b.N), "syscalls/op")
}

// BenchmarkPollCQ: one completion per Poll call, from a CQ filled outside
// the timing.
func BenchmarkPollCQ(b *testing.B) {
	const depth = 256
	p := newBenchPair(b, uverbs.QPCap{MaxSendWR: depth, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	wr := []uverbs.SendWR{{Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{p.a.sge(0, 8)},
		RemoteAddr: uint64(p.b.buf.Addr()), RKey: p.b.mr.RKey()}}
	fill := func() {
		for range depth - 1 {
			if _, err := p.a.qp.PostSend(wr); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(20 * time.Millisecond) // let the kernel complete them
	}
	wc := make([]uverbs.WorkCompletion, 1)
	b.ReportAllocs()
	var syscalls uint64
	left := 0
	b.ResetTimer()
	for range b.N {
		if left == 0 {
			b.StopTimer()
			fill()
			left = depth - 1
			b.StartTimer()
		}
		before := p.ctx.Syscalls()
		for {
			n, err := p.a.cq.Poll(wc)
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
		syscalls += p.ctx.Syscalls() - before
		left--
	}
	b.StopTimer()
	reap(b, p.a.cq, make([]uverbs.WorkCompletion, 64), left)
	b.ReportMetric(float64(syscalls)/float64(b.N), "syscalls/op")
}

// BenchmarkPollCQEmpty: the cost of finding nothing.
func BenchmarkPollCQEmpty(b *testing.B) {
	p := newBenchPair(b, uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	wc := make([]uverbs.WorkCompletion, 16)
	b.ReportAllocs()
	before := p.ctx.Syscalls()
	b.ResetTimer()
	for range b.N {
		if n, _ := p.a.cq.Poll(wc); n != 0 {
			b.Fatal("completion on an idle CQ")
		}
	}
	b.StopTimer()
	reportSyscalls(b, p.ctx, before, b.N)
}

// BenchmarkPingPong: an 8-byte SEND from a to b and back, each side
// busy-polling its CQ; one op is a round trip. latency-ns is half of it.
func BenchmarkPingPong(b *testing.B) {
	p := newBenchPair(b, uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1})
	recvA := []uverbs.RecvWR{{SGL: []uverbs.SGE{p.a.sge(4096, 64)}}}
	recvB := []uverbs.RecvWR{{SGL: []uverbs.SGE{p.b.sge(4096, 64)}}}
	sendA := []uverbs.SendWR{{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{p.a.sge(0, 8)}}}
	sendB := []uverbs.SendWR{{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{p.b.sge(0, 8)}}}
	wc := make([]uverbs.WorkCompletion, 4)
	// Each side's CQ gets its receive completions and its own send
	// completions; waitRecv returns at the next receive and counts the
	// sends it passes.
	sendsDone := map[*benchEnd]int{}
	waitRecv := func(e *benchEnd) {
		for {
			n, err := e.cq.Poll(wc[:1])
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
	if _, err := p.a.qp.PostRecv(recvA); err != nil {
		b.Fatal(err)
	}
	if _, err := p.b.qp.PostRecv(recvB); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	before := p.ctx.Syscalls()
	start := time.Now()
	b.ResetTimer()
	for i := range b.N {
		binary.NativeEndian.PutUint64(p.a.buf.Bytes(), uint64(i))
		if _, err := p.a.qp.PostSend(sendA); err != nil {
			b.Fatal(err)
		}
		waitRecv(p.b)
		if _, err := p.b.qp.PostRecv(recvB); err != nil {
			b.Fatal(err)
		}
		if _, err := p.b.qp.PostSend(sendB); err != nil {
			b.Fatal(err)
		}
		waitRecv(p.a)
		if _, err := p.a.qp.PostRecv(recvA); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	el := time.Since(start)
	reap(b, p.a.cq, wc, b.N-sendsDone[p.a])
	reap(b, p.b.cq, wc, b.N-sendsDone[p.b])
	b.ReportMetric(float64(el.Nanoseconds())/float64(b.N)/2, "latency-ns")
	reportSyscalls(b, p.ctx, before, b.N)
}

// BenchmarkMessageRate: a stream of 8-byte SENDs in lists of 16, with the
// receives kept posted; an op is one message. msgs/s is the rate.
func BenchmarkMessageRate(b *testing.B) {
	const depth, list = 128, 16
	p := newBenchPair(b, uverbs.QPCap{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1})
	sends := make([]uverbs.SendWR, list)
	recvs := make([]uverbs.RecvWR, list)
	for i := range sends {
		sends[i] = uverbs.SendWR{Opcode: uverbs.WRSend, SGL: []uverbs.SGE{p.a.sge(i*8, 8)}}
		recvs[i] = uverbs.RecvWR{SGL: []uverbs.SGE{p.b.sge(i*64, 64)}}
	}
	sends[list-1].Flags = uverbs.SendSignaled
	wc := make([]uverbs.WorkCompletion, 64)
	for range depth / list {
		if _, err := p.b.qp.PostRecv(recvs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	before := p.ctx.Syscalls()
	start := time.Now()
	b.ResetTimer()
	sent, inflight := 0, 0
	for sent < b.N {
		if inflight+list <= depth {
			if _, err := p.a.qp.PostSend(sends); err != nil {
				b.Fatal(err)
			}
			sent += list
			inflight += list
		}
		n, err := p.b.cq.Poll(wc)
		if err != nil {
			b.Fatal(err)
		}
		inflight -= n
		for k := n; k > 0; k -= min(k, list) {
			if _, err := p.b.qp.PostRecv(recvs[:min(k, list)]); err != nil {
				b.Fatal(err)
			}
		}
		if n, _ := p.a.cq.Poll(wc); n > 0 {
			for _, w := range wc[:n] {
				if w.Status != uverbs.WCSuccess {
					b.Fatalf("completion %+v", w)
				}
			}
		}
	}
	for inflight > 0 {
		n, _ := p.b.cq.Poll(wc)
		inflight -= n
	}
	b.StopTimer()
	el := time.Since(start)
	b.ReportMetric(float64(sent)/el.Seconds(), "msgs/s")
	reportSyscalls(b, p.ctx, before, sent)
}
