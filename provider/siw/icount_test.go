package siw

import (
	"os"
	"testing"

	"github.com/goverbs/goverbs/provider"
)

// BenchmarkICount is test/icount.sh's harness for siw, as rxe's and mlx5's
// are for theirs: with ICOUNT=<Name> it sets up one fast-path case on the
// fake rings and runs it in ic<Name>, a loop of its own that callgrind
// counts alone (--toggle-collect). Each loop also plays the kernel (one
// atomic store a call, as the fake-ring benchmarks do). Without ICOUNT it
// skips.

const icN = 8192

//go:noinline
func icSiwPostSend(qp *QP, wr []provider.SendWR, sq *ring, n int) {
	for i := 0; i < n; i++ {
		if _, err := qp.PostSend(wr); err != nil {
			panic(err)
		}
		sq.word(uint32(i), offFlags).Store(0) // the kernel took it
	}
}

//go:noinline
func icSiwPostRecv(qp *QP, wr []provider.RecvWR, rq *ring, n int) {
	for i := 0; i < n; i++ {
		if _, err := qp.PostRecv(wr); err != nil {
			panic(err)
		}
		rq.word(uint32(i), offRqFlags).Store(0) // the kernel took it
	}
}

//go:noinline
func icSiwPoll(cq *CQ, wc []provider.WorkCompletion, r *ring, n int) int {
	t := 0
	for i := 0; i < n; i++ {
		r.word(uint32(i), offCqFlags).Store(validCQE) // the kernel wrote a completion
		k, _ := cq.Poll(wc)
		t += k
	}
	return t
}

func BenchmarkICount(b *testing.B) {
	switch os.Getenv("ICOUNT") {
	case "SiwPostSend":
		fk, c := testContext(b)
		qp, sq, _ := testQP(b, fk, c, 256, 64, false, false)
		qp.Modified(provider.QPStateRTS)
		wr := []provider.SendWR{{Opcode: provider.WRRDMAWrite, RemoteAddr: 0x1000, RKey: 1, SGL: []provider.SGE{{Addr: 0x2000, Length: 8, LKey: 2}}}}
		icSiwPostSend(qp, wr, sq, icN)
	case "SiwPostRecv":
		fk, c := testContext(b)
		qp, _, rq := testQP(b, fk, c, 64, 256, false, false)
		wr := []provider.RecvWR{{SGL: []provider.SGE{{Addr: 0x2000, Length: 64, LKey: 2}}}}
		icSiwPostRecv(qp, wr, rq, icN)
	case "SiwPoll":
		fk, c := testContext(b)
		cq, r := testCQ(b, fk, c, 256)
		wc := make([]provider.WorkCompletion, 1)
		if icSiwPoll(cq, wc, r, icN) != icN {
			b.Fatal("poll")
		}
	default:
		b.Skip("ICOUNT not set")
	}
}
