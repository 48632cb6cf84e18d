package rxe

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
	"golang.org/x/sys/unix"
)

// The fake-queue benchmarks measure the provider's own cost: no kernel, the
// doorbell write goes to the fake (an interface call, no syscall). Compare
// Serial with Parallel for the price of the per-queue mutex under
// contention.

func benchFakeQP(b *testing.B) (*fakeRXE, *QP) {
	fk, c := testContext(b)
	qp := testQP(b, fk, c, qpSpec{sqSlots: 1024, sqLog2: 8, rqSlots: 1024, rqLog2: 6})
	sq := qp.sq.q
	fk.onDoorbell = func(uint32) { sq.cons.Store(sq.prod.Load()) }
	return fk, qp
}

func BenchmarkFakePostSend(b *testing.B) {
	_, qp := benchFakeQP(b)
	wr := []provider.SendWR{{Opcode: provider.WRRDMAWrite, RemoteAddr: 0x1000, RKey: 1, SGL: []provider.SGE{{Addr: 0x2000, Length: 8, LKey: 2}}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := qp.PostSend(wr); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFakePostSendParallel(b *testing.B) {
	_, qp := benchFakeQP(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		wr := []provider.SendWR{{Opcode: provider.WRRDMAWrite, RemoteAddr: 0x1000, RKey: 1, SGL: []provider.SGE{{Addr: 0x2000, Length: 8, LKey: 2}}}}
		for pb.Next() {
			if _, err := qp.PostSend(wr); err != nil && !errors.Is(err, unix.ENOMEM) {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkFakePostRecv(b *testing.B) {
	_, qp := benchFakeQP(b)
	rq := qp.rq.q
	wr := []provider.RecvWR{{SGL: []provider.SGE{{Addr: 0x2000, Length: 64, LKey: 2}}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := qp.PostRecv(wr); err != nil {
			b.Fatal(err)
		}
		rq.cons.Store(rq.prod.Load())
	}
}

func BenchmarkFakePoll(b *testing.B) {
	fk, c := testContext(b)
	cq, kq := testCQ(b, fk, c, 1024, 7)
	wc := make([]provider.WorkCompletion, 1)
	b.ReportAllocs()
	for b.Loop() {
		putWC(kq, abi.IbUverbsWc{WrId: 1})
		if n, _ := cq.Poll(wc); n != 1 {
			b.Fatal("no completion")
		}
	}
}
