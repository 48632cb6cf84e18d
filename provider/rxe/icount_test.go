package rxe

import (
	"os"
	"testing"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// BenchmarkICount is test/icount.sh's harness: with ICOUNT=<Name> it sets
// up one fast-path case and runs it in ic<Name>, a loop of its own that
// callgrind counts alone (--toggle-collect), so that the instructions per
// call of the fast path are a deterministic figure to compare between
// commits, free of a loaded host's noise. Without ICOUNT it skips.

const icN = 8192

//go:noinline
func icFakePostSend(qp *QP, wr []provider.SendWR, n int) {
	for i := 0; i < n; i++ {
		if _, err := qp.PostSend(wr); err != nil {
			panic(err)
		}
	}
}

//go:noinline
func icFakePostRecv(qp *QP, wr []provider.RecvWR, rq *queue, n int) {
	for i := 0; i < n; i++ {
		if _, err := qp.PostRecv(wr); err != nil {
			panic(err)
		}
		rq.cons.Store(rq.prod.Load())
	}
}

//go:noinline
func icFakePoll(cq *CQ, wc []provider.WorkCompletion, n int) int {
	t := 0
	for i := 0; i < n; i++ {
		k, _ := cq.Poll(wc)
		t += k
	}
	return t
}

func BenchmarkICount(b *testing.B) {
	switch os.Getenv("ICOUNT") {
	case "FakePostSend":
		_, qp := benchFakeQP(b)
		wr := []provider.SendWR{{Opcode: provider.WRRDMAWrite, RemoteAddr: 0x1000, RKey: 1, SGL: []provider.SGE{{Addr: 0x2000, Length: 8, LKey: 2}}}}
		icFakePostSend(qp, wr, icN)
	case "FakePostRecv":
		_, qp := benchFakeQP(b)
		wr := []provider.RecvWR{{SGL: []provider.SGE{{Addr: 0x2000, Length: 64, LKey: 2}}}}
		icFakePostRecv(qp, wr, qp.rq.q, icN)
	case "FakePoll":
		fk, c := testContext(b)
		cq, kq := testCQ(b, fk, c, 1024, 7)
		wc := make([]provider.WorkCompletion, 1)
		for r := 0; r < icN/512; r++ {
			for i := 0; i < 512; i++ {
				putWC(kq, abi.IbUverbsWc{WrId: 1})
			}
			if icFakePoll(cq, wc, 512) != 512 {
				b.Fatal("poll")
			}
		}
	default:
		b.Skip("ICOUNT not set")
	}
}
