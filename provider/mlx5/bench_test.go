package mlx5_test

import (
	"testing"
	"time"

	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
)

// The benchmarks time the provider's fast path on the device model with
// the model's hardware side paused while the clock runs, so that ns/op and
// allocs/op are the provider's alone; between rounds (clock stopped) the
// model runs and the queues are drained. syscalls/op counts the command
// file's syscalls while the clock ran: the mlx5 fast path makes none.

const benchRound = 2048

// drainPatience is how long drain waits for the next completion: the model
// completes a round in milliseconds, even under -race on a loaded host,
// but under valgrind (test/icount) its thread can wait tens of seconds.
const drainPatience = 2 * time.Minute

type benchPair struct {
	d    *model.Device
	n    *node
	a, b *uverbs.QP
	cqA  *uverbs.CQ
	cqB  *uverbs.CQ
	sys  uint64 // syscalls counted while the clock ran
	sys0 uint64
	wc   []uverbs.WorkCompletion
}

func newBenchPair(b testing.TB) *benchPair { return newBenchPairThreads(b, false) }

// newBenchPairThreads is newBenchPair whose QPs and CQs are single-threaded
// (QPInit.SingleThreaded, CQOptions.SingleThreaded) if single.
func newBenchPairThreads(b testing.TB, single bool) *benchPair {
	d, dev := newModel(b, nil, model.Options{})
	n := openNode(b, d, dev, uverbs.OpenOptions{})
	c := uverbs.QPCap{MaxSendWR: 4096, MaxRecvWR: 4096, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}
	cq := func() *uverbs.CQ {
		cq, err := n.ctx.CreateCQ(8191, uverbs.CQOptions{SingleThreaded: single})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cq.Close() })
		return cq
	}
	qp := func(cq *uverbs.CQ) *uverbs.QP {
		qp, err := n.pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: c, SingleThreaded: single})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { qp.Close() })
		return qp
	}
	p := &benchPair{d: d, n: n, cqA: cq(), cqB: cq(), wc: make([]uverbs.WorkCompletion, 64)}
	p.a, p.b = qp(p.cqA), qp(p.cqB)
	connect(b, p.a, p.b.QPN(), grhTo(d))
	connect(b, p.b, p.a.QPN(), grhTo(d))
	return p
}

// start pauses the model and starts the clock; stop does the reverse.
func (p *benchPair) start(b *testing.B) {
	p.d.Pause()
	p.sys0 = p.n.ctx.Syscalls()
	b.StartTimer()
}

func (p *benchPair) stop(b *testing.B) {
	b.StopTimer()
	p.sys += p.n.ctx.Syscalls() - p.sys0
	p.d.Resume()
}

// drain polls n successful completions from cq (the model running), and
// fails the test if drainPatience passes without one: a lost completion
// is a failure, not a hang until go test's timeout.
func (p *benchPair) drain(b testing.TB, cq *uverbs.CQ, n int) {
	var idleSince time.Time
	for empty := 0; n > 0; {
		k, err := cq.Poll(p.wc[:min(n, len(p.wc))])
		if err != nil {
			b.Fatal(err)
		}
		if k == 0 {
			// The clock is read once per 4096 empty polls, not per poll.
			if empty++; empty%4096 == 1 {
				if idleSince.IsZero() {
					idleSince = time.Now()
				} else if time.Since(idleSince) > drainPatience {
					b.Fatalf("drain: %d completions still missing after %v without one", n, drainPatience)
				}
			}
			continue
		}
		empty, idleSince = 0, time.Time{}
		for _, w := range p.wc[:k] {
			if w.Status != uverbs.WCSuccess {
				b.Fatalf("completion %+v", w)
			}
		}
		n -= k
	}
}

func (p *benchPair) report(b *testing.B) {
	b.ReportMetric(float64(p.sys)/float64(b.N), "syscalls/op")
}

// BenchmarkPostSend posts one RDMA WRITE per call: 64 bytes from one SGE,
// or 8 bytes inline (both go to the device as BlueFlame copies).
func BenchmarkPostSend(b *testing.B) {
	b.Run("sge", func(b *testing.B) {
		p := newBenchPair(b)
		n := p.n
		benchPostSendOn(b, p, uverbs.SendWR{ID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			RemoteAddr: n.addr(65536), RKey: n.mr.RKey(), SGL: []uverbs.SGE{n.sge(0, 64)}})
	})
	b.Run("inline8", func(b *testing.B) {
		p := newBenchPair(b)
		n := p.n
		benchPostSendOn(b, p, uverbs.SendWR{ID: 2, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled | uverbs.SendInline,
			RemoteAddr: n.addr(65536), RKey: n.mr.RKey(), SGL: []uverbs.SGE{n.sge(0, 8)}})
	})
}

func benchPostSendOn(b *testing.B, p *benchPair, wr uverbs.SendWR) {
	wrs := []uverbs.SendWR{wr}
	b.ReportAllocs()
	b.StopTimer()
	b.ResetTimer()
	p.start(b)
	posted := 0
	for i := 0; i < b.N; i++ {
		if posted == benchRound {
			p.stop(b)
			p.drain(b, p.cqA, posted)
			posted = 0
			p.start(b)
		}
		if _, err := p.a.PostSend(wrs); err != nil {
			b.Fatal(err)
		}
		posted++
	}
	p.stop(b)
	p.drain(b, p.cqA, posted)
	p.report(b)
}

// BenchmarkPostRecv posts one receive of one SGE per call.
func BenchmarkPostRecv(b *testing.B) {
	p := newBenchPair(b)
	n := p.n
	recv := []uverbs.RecvWR{{ID: 3, SGL: []uverbs.SGE{n.sge(4096, 64)}}}
	sends := make([]uverbs.SendWR, 64)
	for i := range sends {
		sends[i] = uverbs.SendWR{ID: 4, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{n.sge(0, 16)}}
	}
	consume := func(k int) { // the peer's SENDs use up k receives
		for k > 0 {
			m := min(k, len(sends))
			if _, err := p.a.PostSend(sends[:m]); err != nil {
				b.Fatal(err)
			}
			p.drain(b, p.cqA, m)
			p.drain(b, p.cqB, m)
			k -= m
		}
	}
	b.ReportAllocs()
	b.StopTimer()
	b.ResetTimer()
	p.start(b)
	posted := 0
	for i := 0; i < b.N; i++ {
		if posted == benchRound {
			p.stop(b)
			consume(posted)
			posted = 0
			p.start(b)
		}
		if _, err := p.b.PostRecv(recv); err != nil {
			b.Fatal(err)
		}
		posted++
	}
	p.stop(b)
	consume(posted)
	p.report(b)
}

// BenchmarkPostSendPoll is the fast path's pair, issue 14's figure: each
// op posts one signaled 64-byte RDMA WRITE (one SGE, a BlueFlame copy) and
// polls one completion, of a WRITE the device completed in the round
// before (the device model runs between rounds, with the clock stopped).
// "locked" is the default QP and CQ, safe for concurrent use; "single" is
// the single-threaded pair (QPInit and CQOptions.SingleThreaded), which
// makes no locked instruction.
func BenchmarkPostSendPoll(b *testing.B) {
	b.Run("locked", func(b *testing.B) { benchPostSendPoll(b, false) })
	b.Run("single", func(b *testing.B) { benchPostSendPoll(b, true) })
}

func benchPostSendPoll(b *testing.B, single bool) {
	p := newBenchPairThreads(b, single)
	n := p.n
	wrs := []uverbs.SendWR{{ID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		RemoteAddr: n.addr(65536), RKey: n.mr.RKey(), SGL: []uverbs.SGE{n.sge(0, 64)}}}
	wc := make([]uverbs.WorkCompletion, 1)
	cqes := func() int { return p.d.Stats().CQEs }
	await := func(before, k int) { // the device completes k more WRITEs
		for cqes()-before < k {
		}
	}
	b.ReportAllocs()
	b.StopTimer()
	b.ResetTimer()
	before := cqes()
	for range benchRound {
		if _, err := p.a.PostSend(wrs); err != nil {
			b.Fatal(err)
		}
	}
	await(before, benchRound)
	p.start(b)
	ready := benchRound
	for i := 0; i < b.N; i++ {
		if ready == 0 {
			before := cqes() // paused: nothing completes until stop
			p.stop(b)
			await(before, benchRound)
			ready = benchRound
			p.start(b)
		}
		if _, err := p.a.PostSend(wrs); err != nil {
			b.Fatal(err)
		}
		if k, err := p.cqA.Poll(wc); k != 1 || err != nil || wc[0].Status != uverbs.WCSuccess {
			b.Fatalf("Poll = %d, %v, %+v", k, err, wc[0])
		}
		ready--
	}
	before = cqes()
	p.stop(b)
	posted := benchRound - ready // posted in this round, not completed yet
	await(before, posted)
	p.drain(b, p.cqA, ready+posted)
	p.report(b)
}

// BenchmarkPollCQ polls one completion per call from a CQ the device
// filled beforehand; "empty" polls a CQ with nothing in it.
func BenchmarkPollCQ(b *testing.B) {
	b.Run("one", func(b *testing.B) {
		p := newBenchPair(b)
		n := p.n
		sends := make([]uverbs.SendWR, 64)
		for i := range sends {
			sends[i] = uverbs.SendWR{ID: uint64(i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
				RemoteAddr: n.addr(65536), RKey: n.mr.RKey(), SGL: []uverbs.SGE{n.sge(0, 8)}}
		}
		fill := func() { // the device completes benchRound WRITEs
			before := p.d.Stats().CQEs
			for k := 0; k < benchRound; k += len(sends) {
				if _, err := p.a.PostSend(sends); err != nil {
					b.Fatal(err)
				}
			}
			for p.d.Stats().CQEs-before < benchRound {
			}
		}
		wc := make([]uverbs.WorkCompletion, 1)
		b.ReportAllocs()
		b.StopTimer()
		b.ResetTimer()
		fill()
		p.start(b)
		left := benchRound
		for i := 0; i < b.N; i++ {
			if left == 0 {
				p.stop(b)
				fill()
				left = benchRound
				p.start(b)
			}
			if k, err := p.cqA.Poll(wc); k != 1 || err != nil {
				b.Fatalf("Poll = %d, %v", k, err)
			}
			left--
		}
		p.stop(b)
		p.drain(b, p.cqA, left)
		p.report(b)
	})
	b.Run("empty", func(b *testing.B) {
		p := newBenchPair(b)
		wc := make([]uverbs.WorkCompletion, 16)
		b.ReportAllocs()
		b.StopTimer()
		b.ResetTimer()
		p.start(b)
		for i := 0; i < b.N; i++ {
			if k, _ := p.cqA.Poll(wc); k != 0 {
				b.Fatal("completion on an idle CQ")
			}
		}
		p.stop(b)
		p.report(b)
	})
}

// BenchmarkCQPoll reads completions through passes of the extended CQ
// (StartPoll, Next, End) from a CQ the device filled beforehand, on a CQ
// with and without completion timestamps: one completion per pass, and
// (pass16) sixteen, where the consumer index is written once per pass.
// Each op is one completion read.
func BenchmarkCQPoll(b *testing.B) {
	for _, v := range []struct {
		name    string
		stamps  bool
		perPass int
	}{{"plain", false, 1}, {"timestamps", true, 1}, {"pass16", false, 16}} {
		stamps, perPass := v.stamps, v.perPass
		b.Run(v.name, func(b *testing.B) {
			d, dev := newModel(b, nil, model.Options{})
			n := openNode(b, d, dev, uverbs.OpenOptions{})
			cq, err := n.ctx.CreateCQ(8191, uverbs.CQOptions{Timestamps: stamps})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { cq.Close() })
			c := uverbs.QPCap{MaxSendWR: 4096, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
			p := &benchPair{d: d, n: n, cqA: cq, cqB: n.cq(64, nil), wc: make([]uverbs.WorkCompletion, 64)}
			p.a, p.b = n.qp(uverbs.QPTypeRC, p.cqA, c), n.qp(uverbs.QPTypeRC, p.cqB, c)
			connect(b, p.a, p.b.QPN(), grhTo(d))
			connect(b, p.b, p.a.QPN(), grhTo(d))
			sends := make([]uverbs.SendWR, 64)
			for i := range sends {
				sends[i] = uverbs.SendWR{ID: uint64(i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
					RemoteAddr: n.addr(65536), RKey: n.mr.RKey(), SGL: []uverbs.SGE{n.sge(0, 8)}}
			}
			fill := func() {
				before := p.d.Stats().CQEs
				for k := 0; k < benchRound; k += len(sends) {
					if _, err := p.a.PostSend(sends); err != nil {
						b.Fatal(err)
					}
				}
				for p.d.Stats().CQEs-before < benchRound {
				}
			}
			b.ReportAllocs()
			b.StopTimer()
			b.ResetTimer()
			fill()
			p.start(b)
			left := benchRound
			var last uint64
			for i := 0; i < b.N; {
				if left == 0 {
					p.stop(b)
					fill()
					left = benchRound
					p.start(b)
				}
				ps := cq.StartPoll()
				for k := 0; k < perPass && i < b.N && left > 0; k++ {
					if !ps.Next() || ps.Status() != uverbs.WCSuccess {
						b.Fatalf("pass: %v", ps.End())
					}
					last = ps.Timestamp()
					left--
					i++
				}
				if err := ps.End(); err != nil {
					b.Fatal(err)
				}
			}
			p.stop(b)
			p.drain(b, p.cqA, left)
			p.report(b)
			if stamps == (last == 0) {
				b.Errorf("timestamps %v, last timestamp read %d", stamps, last)
			}
		})
	}
}

// BenchmarkWRBatch posts one RDMA WRITE per call through the extended
// QP's builder (StartWR, RDMAWrite, SetSGE, Complete).
func BenchmarkWRBatch(b *testing.B) {
	p := newBenchPair(b)
	n := p.n
	rkey, lkey, raddr, laddr := n.mr.RKey(), n.mr.LKey(), n.addr(65536), n.addr(0)
	p.a.StartWR().Abort() // the batch's storage, allocated once per QP
	b.ReportAllocs()
	b.StopTimer()
	b.ResetTimer()
	p.start(b)
	posted := 0
	for i := 0; i < b.N; i++ {
		if posted == benchRound {
			p.stop(b)
			p.drain(b, p.cqA, posted)
			posted = 0
			p.start(b)
		}
		wb := p.a.StartWR()
		wb.RDMAWrite(1, uverbs.SendSignaled, rkey, raddr).SetSGE(lkey, laddr, 64)
		if err := wb.Complete(); err != nil {
			b.Fatal(err)
		}
		posted++
	}
	p.stop(b)
	p.drain(b, p.cqA, posted)
	p.report(b)
}
