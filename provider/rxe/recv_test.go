package rxe

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/provider"
	"golang.org/x/sys/unix"
)

// TestRecvOneMatchesGeneric: over stale slot bytes, fillRecvOne (a
// receive of one SGE or none, posted alone) writes exactly what the list's
// fillRecv writes for the same request.
func TestRecvOneMatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewSource(28))
	fk, c := testContext(t)
	qp := testQP(t, fk, c, qpSpec{rqSlots: 16, rqLog2: 7, cap: provider.QPCap{MaxSendWR: 15, MaxRecvWR: 15, MaxSendSGE: 1, MaxRecvSGE: 4}})
	q := qp.rq.q
	size := q.slotSize()
	lengths := []uint32{0, 1, 64, 4096, provider.MaxMessage, 1<<32 - 1}
	for k := 0; k < 10000; k++ {
		s := provider.SGE{Addr: rng.Uint64(), Length: lengths[rng.Intn(len(lengths))], LKey: rng.Uint32()}
		if rng.Intn(2) == 0 {
			s.Length = rng.Uint32()
		}
		wr := provider.RecvWR{ID: rng.Uint64(), SGL: []provider.SGE{s}}
		one := &wr.SGL[0]
		if rng.Intn(4) == 0 { // rsocket's receive: no SGE
			wr.SGL, one = nil, nil
		}
		slot := uint32(rng.Intn(int(q.mask) + 1))
		stale := make([]byte, size)
		rng.Read(stale)
		mem := unsafe.Slice((*byte)(q.slot(slot)), size)
		copy(mem, stale)
		fillRecv(q, slot, &wr)
		want := bytes.Clone(mem)
		copy(mem, stale)
		fillRecvOne(q.recvWQE(slot), wr.ID, one)
		if !bytes.Equal(want, mem) {
			t.Fatalf("%+v: fillRecvOne wrote\n% x\nfillRecv\n% x", wr, mem, want)
		}
	}
}

// TestPostRecvOneRefusals: a lone one-SGE receive the short path cannot
// post goes to the list's path, which refuses it as it refuses any list
// (the count, the error, the queue untouched); one it can post (one SGE or
// none) lands in the next slot.
func TestPostRecvOneRefusals(t *testing.T) {
	fk, c := testContext(t)
	qp := testQP(t, fk, c, qpSpec{rqSlots: 4, rqLog2: 6})
	q := qp.rq.q
	one := func(id uint64, length uint32) []provider.RecvWR {
		return []provider.RecvWR{{ID: id, SGL: []provider.SGE{{Addr: 0x1000, Length: length, LKey: 3}}}}
	}
	before := bytes.Clone(q.mem)
	if n, err := qp.PostRecv(one(1, provider.MaxMessage+1)); n != 0 || !errors.Is(err, unix.EINVAL) {
		t.Errorf("a receive of 2^31+1 bytes: %d, %v; want 0, EINVAL", n, err)
	}
	if !bytes.Equal(before, q.mem) {
		t.Fatal("a refused receive changed the queue")
	}
	for i := uint64(0); i < 2; i++ { // 4 slots: 3 usable
		if n, err := qp.PostRecv(one(10+i, 64)); n != 1 || err != nil {
			t.Fatalf("receive %d: %d, %v", i, n, err)
		}
		if w := slotBytes(q, uint32(i)); ne.Uint64(w[0:]) != 10+i || ne.Uint32(w[16:]) != 64 || ne.Uint32(w[28:]) != 1 ||
			ne.Uint64(w[40:]) != 0x1000 || ne.Uint32(w[48:]) != 64 || ne.Uint32(w[52:]) != 3 {
			t.Errorf("receive %d's WQE % x", i, w[:56])
		}
	}
	// rsocket's receive, no SGE: the third slot, length and SGE count 0
	if n, err := qp.PostRecv([]provider.RecvWR{{ID: 12}}); n != 1 || err != nil {
		t.Fatalf("a receive without an SGE: %d, %v", n, err)
	}
	if w := slotBytes(q, 2); ne.Uint64(w[0:]) != 12 || ne.Uint32(w[8:]) != 0 || ne.Uint32(w[16:]) != 0 || ne.Uint32(w[20:]) != 0 || ne.Uint32(w[28:]) != 0 {
		t.Errorf("the receive without an SGE: WQE % x", w[:32])
	}
	before = bytes.Clone(q.mem)
	if n, err := qp.PostRecv(one(20, 64)); n != 0 || !errors.Is(err, unix.ENOMEM) {
		t.Errorf("a receive into a full queue: %d, %v; want 0, ENOMEM", n, err)
	}
	if !bytes.Equal(before, q.mem) || q.prod.Load() != 3 {
		t.Errorf("a refused receive changed the queue (producer %d)", q.prod.Load())
	}
	if err := qp.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := qp.PostRecv(one(21, 64)); n != 0 || !errors.Is(err, provider.ErrClosed) {
		t.Errorf("a receive on a closed QP: %d, %v; want 0, ErrClosed", n, err)
	}
}
