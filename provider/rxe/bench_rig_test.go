package rxe_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/verbsbench"
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

type benchPair struct {
	ctx  *uverbs.Context
	a, b *benchEnd
}

// pair is p as verbsbench takes it: a sends, b receives.
func (p *benchPair) pair() verbsbench.Pair {
	end := func(e *benchEnd) *verbsbench.End {
		return &verbsbench.End{Ctx: p.ctx, QP: e.qp, CQ: e.cq, Buf: e.buf.Bytes(), MR: e.mr}
	}
	return verbsbench.Pair{A: end(p.a), B: end(p.b)}
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

// The benchmark bodies are internal/verbsbench's, shared with siw.

// BenchmarkPostSend: one 8-byte RDMA WRITE per PostSend call, every 16th
// signaled, up to 64 in flight; the completions are reaped inside the
// timing, as a streaming sender does.
func BenchmarkPostSend(b *testing.B) { benchPostSend(b, 1) }

// BenchmarkPostSendList8: lists of eight WRITEs, one doorbell each; an op
// is one work request.
func BenchmarkPostSendList8(b *testing.B) { benchPostSend(b, 8) }

func benchPostSend(b *testing.B, list int) {
	const depth = 64
	p := newBenchPair(b, uverbs.QPCap{MaxSendWR: depth, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	verbsbench.PostSend(b, p.pair(), depth, list)
}

// BenchmarkPostRecv: one receive per call; when the queue is full the peer
// consumes it outside the timing.
func BenchmarkPostRecv(b *testing.B) {
	const depth = 256
	p := newBenchPair(b, uverbs.QPCap{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1})
	verbsbench.PostRecv(b, p.pair(), depth)
}

// BenchmarkPollCQ: one completion per Poll call, from a CQ filled outside
// the timing.
func BenchmarkPollCQ(b *testing.B) {
	const depth = 256
	p := newBenchPair(b, uverbs.QPCap{MaxSendWR: depth, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	verbsbench.PollCQ(b, p.pair(), depth)
}

// BenchmarkPollCQEmpty: the cost of finding nothing.
func BenchmarkPollCQEmpty(b *testing.B) {
	p := newBenchPair(b, uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	verbsbench.PollCQEmpty(b, p.pair())
}

// BenchmarkPingPong: an 8-byte SEND from a to b and back, each side
// busy-polling its CQ; one op is a round trip. latency-ns is half of it.
func BenchmarkPingPong(b *testing.B) {
	p := newBenchPair(b, uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1})
	verbsbench.PingPong(b, p.pair())
}

// BenchmarkMessageRate: a stream of 8-byte SENDs in lists of 16, with the
// receives kept posted; an op is one message. msgs/s is the rate.
func BenchmarkMessageRate(b *testing.B) {
	const depth, list = 128, 16
	p := newBenchPair(b, uverbs.QPCap{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1})
	verbsbench.MessageRate(b, p.pair(), depth, list)
}
