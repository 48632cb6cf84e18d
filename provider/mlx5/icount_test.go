package mlx5_test

import (
	"os"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/uverbs"
)

// BenchmarkICount is test/icount.sh's harness: with ICOUNT=<Name> it sets
// up one fast-path case and runs it in ic<Name>, a loop of its own that
// callgrind counts alone (--toggle-collect), so that the instructions per
// call of the fast path are a deterministic figure to compare between
// commits, free of a loaded host's noise. Without ICOUNT it skips. A name
// that ends in Single runs its case on the single-threaded pair
// (QPInit.SingleThreaded, CQOptions.SingleThreaded).

const icRounds = 4

//go:noinline
func icPollEmpty(cq *uverbs.CQ, wc []uverbs.WorkCompletion, n int) int {
	t := 0
	for i := 0; i < n; i++ {
		k, _ := cq.Poll(wc)
		t += k
	}
	return t
}

//go:noinline
func icPollOne(cq *uverbs.CQ, wc []uverbs.WorkCompletion, n int) int {
	t := 0
	for i := 0; i < n; i++ {
		k, _ := cq.Poll(wc)
		t += k
	}
	return t
}

//go:noinline
func icPostSendSGE(qp *uverbs.QP, wrs []uverbs.SendWR, n int) {
	for i := 0; i < n; i++ {
		if _, err := qp.PostSend(wrs); err != nil {
			panic(err)
		}
	}
}

//go:noinline
func icPostSendInline(qp *uverbs.QP, wrs []uverbs.SendWR, n int) {
	for i := 0; i < n; i++ {
		if _, err := qp.PostSend(wrs); err != nil {
			panic(err)
		}
	}
}

//go:noinline
func icPostRecv(qp *uverbs.QP, wrs []uverbs.RecvWR, n int) {
	for i := 0; i < n; i++ {
		if _, err := qp.PostRecv(wrs); err != nil {
			panic(err)
		}
	}
}

func BenchmarkICount(b *testing.B) {
	which, single := strings.CutSuffix(os.Getenv("ICOUNT"), "Single")
	p := newBenchPairThreads(b, single)
	n := p.n
	switch which {
	case "PollEmpty":
		wc := make([]uverbs.WorkCompletion, 16)
		p.d.Pause()
		if icPollEmpty(p.cqA, wc, icRounds*benchRound) != 0 {
			b.Fatal("completion on an idle CQ")
		}
		p.d.Resume()
	case "PollOne":
		sends := make([]uverbs.SendWR, 64)
		for i := range sends {
			sends[i] = uverbs.SendWR{ID: uint64(i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
				RemoteAddr: n.addr(65536), RKey: n.mr.RKey(), SGL: []uverbs.SGE{n.sge(0, 8)}}
		}
		wc := make([]uverbs.WorkCompletion, 1)
		for r := 0; r < icRounds; r++ {
			before := p.d.Stats().CQEs
			for k := 0; k < benchRound; k += len(sends) {
				if _, err := p.a.PostSend(sends); err != nil {
					b.Fatal(err)
				}
			}
			for p.d.Stats().CQEs-before < benchRound {
			}
			p.d.Pause()
			if got := icPollOne(p.cqA, wc, benchRound); got != benchRound {
				b.Fatalf("polled %d", got)
			}
			p.d.Resume()
		}
	case "PostSendSGE", "PostSendInline":
		wr := uverbs.SendWR{ID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			RemoteAddr: n.addr(65536), RKey: n.mr.RKey(), SGL: []uverbs.SGE{n.sge(0, 64)}}
		if which == "PostSendInline" {
			wr = uverbs.SendWR{ID: 2, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled | uverbs.SendInline,
				RemoteAddr: n.addr(65536), RKey: n.mr.RKey(), SGL: []uverbs.SGE{n.sge(0, 8)}}
		}
		wrs := []uverbs.SendWR{wr}
		for r := 0; r < icRounds; r++ {
			p.d.Pause()
			if which == "PostSendInline" {
				icPostSendInline(p.a, wrs, benchRound)
			} else {
				icPostSendSGE(p.a, wrs, benchRound)
			}
			p.d.Resume()
			p.drain(b, p.cqA, benchRound)
		}
	case "PostRecv": // one round: the RQ holds 4096, so nothing needs consuming
		recv := []uverbs.RecvWR{{ID: 3, SGL: []uverbs.SGE{n.sge(4096, 64)}}}
		p.d.Pause()
		icPostRecv(p.b, recv, benchRound)
		p.d.Resume()
	default:
		b.Skip("ICOUNT not set")
	}
}
