package mlx5

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/goverbs/goverbs/provider"
)

// TestRecvOneMatchesList posts random lone receives through PostRecv (its
// one-receive path) on one QP and through postRecvList on a twin in the
// same state: rings (over stale bytes), wr_ids, counters, doorbell records
// and answers must match, refusals included (a QP closed, lost, in RESET,
// on an SRQ, full, or a receive too long, empty or of no SGE room).
func TestRecvOneMatchesList(t *testing.T) {
	rng := rand.New(rand.NewPCG(28, 1))
	lengths := []uint32{0, 1, 64, 4096, provider.MaxMessage, provider.MaxMessage + 1, ^uint32(0)}
	one, list := 0, 0
	for _, shape := range []struct{ shift, maxSGE uint32 }{{4, 1}, {5, 1}, {5, 2}, {6, 4}, {4, 0}} {
		twins := [2]*qp{newRingQP(t), newRingQP(t)}
		for _, q := range twins {
			q.rq.shift, q.rq.maxSGE = shape.shift, shape.maxSGE
			q.rq.ring = q.mem.Bytes()[:q.rq.cnt<<shape.shift]
			for i := range q.rq.ring {
				q.rq.ring[i] = byte(i*13 + 5) // stale bytes, as a reused ring has
			}
		}
		for k := range 3000 {
			s := provider.SGE{Addr: rng.Uint64(), Length: lengths[rng.IntN(len(lengths))], LKey: rng.Uint32()}
			if rng.IntN(2) == 0 {
				s.Length = 1 + rng.Uint32N(1<<20)
			}
			wr := provider.RecvWR{ID: rng.Uint64(), SGL: []provider.SGE{s}}
			state, closed, lost, onSRQ := provider.QPStateRTS, false, false, false
			switch rng.IntN(40) {
			case 0:
				state = provider.QPStateReset
			case 1:
				closed = true
			case 2:
				lost = true
			case 3:
				onSRQ = true
			}
			tail := twins[0].rq.head - uint32(rng.IntN(int(twins[0].rq.cnt)+1)) // full at times
			var got [2]string
			for i, q := range twins {
				q.state.Store(uint32(state))
				q.closed.Store(closed)
				q.ctx.lost.Store(lost)
				q.srq = nil
				if onSRQ {
					q.srq = &srq{}
				}
				q.rq.tail.Store(tail)
				var n int
				var err error
				if i == 0 {
					n, err = q.PostRecv([]provider.RecvWR{wr})
				} else {
					n, err = q.postRecvList([]provider.RecvWR{wr})
				}
				got[i] = fmt.Sprintf("%d %v head %d pub %d record %d", n, err, q.rq.head, q.rq.pub.Load(), *q.recvRec)
			}
			a, b := twins[0], twins[1]
			if got[0] != got[1] || !bytes.Equal(a.rq.ring, b.rq.ring) || !bytes.Equal(a.mem.Bytes(), b.mem.Bytes()) ||
				fmt.Sprint(a.rq.wrid) != fmt.Sprint(b.rq.wrid) {
				t.Fatalf("stride %d, %d SGEs, receive %d %+v: PostRecv gave %s, postRecvList %s; rings equal %v",
					1<<shape.shift, shape.maxSGE, k, wr, got[0], got[1], bytes.Equal(a.rq.ring, b.rq.ring))
			}
			if a.rq.head != b.rq.head {
				t.Fatal("heads differ")
			}
			if state == provider.QPStateRTS && !closed && !lost && !onSRQ && shape.maxSGE > 0 && s.Length > 0 &&
				s.Length <= provider.MaxMessage && a.rq.head-tail < a.rq.cnt {
				one++
			} else {
				list++
			}
		}
	}
	if one < 5000 || list < 2000 {
		t.Fatalf("%d receives for the short path and %d for the list's: the test checks too little", one, list)
	}
}
