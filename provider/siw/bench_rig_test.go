package siw_test

import (
	"context"
	"testing"
	"time"

	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// Benchmarks on siw0 in the rig (a real kernel under TCG: absolute times
// are the emulator's, ratios are what matter), over a loopback connection
// made by rdma_cm. Each reports allocations and syscalls per operation
// (the command file's counter).
//
//	test/rig/run.sh --bin DIR -- 'siw.test -test.run NONE -test.bench . -test.benchtime 2000x'

type benchConn struct {
	client, server *rdmacm.Conn
	bc, bs         *buf
	ctx            *uverbs.Context
}

func newBenchConn(b *testing.B, depth uint32) *benchConn {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	b.Cleanup(cancel)
	cfg := rdmacm.Config{Cap: uverbs.QPCap{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1},
		CQEntries: int(4 * depth)}
	client, server := connect(b, ctx, cfg)
	return &benchConn{client: client, server: server, bc: newBuf(b, client.PD(), 1<<16), bs: newBuf(b, server.PD(), 1<<16),
		ctx: client.PD().Context()}
}

// reap polls cq until n successful completions came.
func reap(b *testing.B, cq *uverbs.CQ, wc []uverbs.WorkCompletion, n int) {
	deadline := time.Now().Add(60 * time.Second)
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
		if k == 0 && time.Now().After(deadline) {
			b.Fatalf("%d completions missing after 60 s", n)
		}
	}
}

// BenchmarkPostSend: one 8-byte RDMA WRITE per call, every 16th
// signaled, up to 64 in flight, completions reaped inside the timing as a
// streaming sender does. syscalls/op is the doorbell rule at work: one
// per PostSend on an idle queue, none on a busy one.
func BenchmarkPostSend(b *testing.B) {
	const depth, every = 64, 16
	p := newBenchConn(b, depth)
	wrs := []uverbs.SendWR{{Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{p.bc.sge(0, 8)},
		RemoteAddr: p.bs.mr.Addr(), RKey: p.bs.mr.RKey()}}
	wc := make([]uverbs.WorkCompletion, 16)
	b.ReportAllocs()
	before := p.ctx.Syscalls()
	b.ResetTimer()
	signaled := 0
	for n := range b.N {
		for signaled*every+1 > depth-every {
			k, err := p.client.CQ.Poll(wc)
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
		wrs[0].Flags = 0
		if n%every == every-1 {
			wrs[0].Flags = uverbs.SendSignaled
			signaled++
		}
		if _, err := p.client.QP.PostSend(wrs); err != nil {
			b.Fatal(err)
		}
	}
	reap(b, p.client.CQ, wc, signaled)
	b.StopTimer()
	b.ReportMetric(float64(p.ctx.Syscalls()-before)/float64(b.N), "syscalls/op")
}

// BenchmarkPostRecv: one receive per call; when the queue is full the
// peer consumes it outside the timing.
func BenchmarkPostRecv(b *testing.B) {
	const depth = 256
	p := newBenchConn(b, depth)
	recv := []uverbs.RecvWR{{SGL: []uverbs.SGE{p.bs.sge(0, 64)}}}
	send := []uverbs.SendWR{{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{p.bc.sge(0, 8)}}}
	wc := make([]uverbs.WorkCompletion, 64)
	sctx := p.server.PD().Context()
	drain := func(k int) {
		for range k {
			if _, err := p.client.QP.PostSend(send); err != nil {
				b.Fatal(err)
			}
		}
		reap(b, p.client.CQ, wc, k)
		reap(b, p.server.CQ, wc, k)
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
		before := sctx.Syscalls()
		recv[0].ID = uint64(i)
		if _, err := p.server.QP.PostRecv(recv); err != nil {
			b.Fatal(err)
		}
		syscalls += sctx.Syscalls() - before
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
	p := newBenchConn(b, depth)
	wr := []uverbs.SendWR{{Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{p.bc.sge(0, 8)},
		RemoteAddr: p.bs.mr.Addr(), RKey: p.bs.mr.RKey()}}
	wc := make([]uverbs.WorkCompletion, 1)
	b.ReportAllocs()
	var syscalls uint64
	left := 0
	b.ResetTimer()
	for range b.N {
		if left == 0 {
			b.StopTimer()
			for range depth - 1 {
				if _, err := p.client.QP.PostSend(wr); err != nil {
					b.Fatal(err)
				}
			}
			left = depth - 1
			b.StartTimer()
		}
		before := p.ctx.Syscalls()
		for {
			n, err := p.client.CQ.Poll(wc)
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
	reap(b, p.client.CQ, make([]uverbs.WorkCompletion, 64), left)
	b.ReportMetric(float64(syscalls)/float64(b.N), "syscalls/op")
}

// BenchmarkPollCQEmpty: the cost of finding nothing.
func BenchmarkPollCQEmpty(b *testing.B) {
	p := newBenchConn(b, 16)
	wc := make([]uverbs.WorkCompletion, 16)
	b.ReportAllocs()
	before := p.ctx.Syscalls()
	b.ResetTimer()
	for range b.N {
		if n, err := p.client.CQ.Poll(wc); n != 0 || err != nil {
			b.Fatal(n, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(p.ctx.Syscalls()-before)/float64(b.N), "syscalls/op")
}
