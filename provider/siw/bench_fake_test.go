package siw

import (
	"encoding/binary"
	"testing"

	"github.com/goverbs/goverbs/abi"

	"github.com/goverbs/goverbs/provider"
)

// The fake-ring benchmarks measure the provider's own cost: no kernel;
// the benchmark plays the kernel by clearing the entries it posted.

func BenchmarkFakePostRecv(b *testing.B) {
	fk, c := testContext(b)
	qp, _, rq := testQP(b, fk, c, 64, 256, false, false)
	wr := []provider.RecvWR{{SGL: []provider.SGE{{Addr: 0x2000, Length: 64, LKey: 2}}}}
	b.ReportAllocs()
	i := uint32(0)
	for b.Loop() {
		if _, err := qp.PostRecv(wr); err != nil {
			b.Fatal(err)
		}
		rq.word(i, offRqFlags).Store(0) // the kernel took it
		i++
	}
}

func BenchmarkFakePostSend(b *testing.B) {
	fk, c := testContext(b)
	qp, sq, _ := testQP(b, fk, c, 256, 64, false, false)
	qp.Modified(provider.QPStateRTS)
	wr := []provider.SendWR{{Opcode: provider.WRRDMAWrite, RemoteAddr: 0x1000, RKey: 1, SGL: []provider.SGE{{Addr: 0x2000, Length: 8, LKey: 2}}}}
	b.ReportAllocs()
	i := uint32(0)
	for b.Loop() {
		if _, err := qp.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		sq.word(i, offFlags).Store(0) // the kernel took it
		i++
	}
}

// validCQE is a CQE's first word after the id with the flags byte
// SIW_WQE_VALID: a successful completion.
var validCQE = binary.NativeEndian.Uint32([]byte{abi.SIW_WQE_VALID, 0, 0, 0})

func BenchmarkFakePoll(b *testing.B) {
	fk, c := testContext(b)
	cq, r := testCQ(b, fk, c, 256)
	wc := make([]provider.WorkCompletion, 1)
	b.ReportAllocs()
	i := uint32(0)
	for b.Loop() {
		r.word(i, offCqFlags).Store(validCQE) // the kernel wrote a completion
		if n, _ := cq.Poll(wc); n != 1 {
			b.Fatal("no completion")
		}
		i++
	}
}
