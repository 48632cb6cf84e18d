package rxe

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/provider"
	"golang.org/x/sys/unix"
)

// putWC writes a kernel completion at the producer slot of the kernel's view
// of a CQ and publishes it.
func putWC(q *queue, wc abi.IbUverbsWc) {
	p := q.prod.Load()
	*q.wc(p) = wc
	q.prod.Store((p + 1) & q.mask)
}

func TestPoll(t *testing.T) {
	fk, c := testContext(t)
	cq, kq := testCQ(t, fk, c, 8, 7)
	var wc [4]provider.WorkCompletion
	if n, err := cq.Poll(wc[:]); n != 0 || err != nil {
		t.Fatalf("Poll on an empty CQ = %d, %v", n, err)
	}
	recv := abi.IbUverbsWc{WrId: 0x1111, Opcode: 128, ByteLen: 64, QpNum: 17, SrcQp: 3, WcFlags: kwcGRH | kwcWithImm,
		Ex: [4]byte{0xde, 0xad, 0xbe, 0xef}, PkeyIndex: 2, Slid: 5, Sl: 1, DlidPathBits: 2, PortNum: 1}
	putWC(kq, recv)
	inv := abi.IbUverbsWc{WrId: 2, Opcode: 128, WcFlags: kwcWithInv | kwcIPCSumOK}
	ne.PutUint32(inv.Ex[:], 0x1234)
	putWC(kq, inv)
	putWC(kq, abi.IbUverbsWc{WrId: 3, Status: uint32(provider.WCRemAccessErr), Opcode: 1, VendorErr: 9})
	n, err := cq.Poll(wc[:2])
	if n != 2 || err != nil {
		t.Fatalf("Poll = %d, %v", n, err)
	}
	want := provider.WorkCompletion{ID: 0x1111, Opcode: provider.WCRecv, ByteLen: 64, Imm: 0xdeadbeef, QPNum: 17, SrcQP: 3,
		Flags: provider.WCWithGRH | provider.WCWithImm, PKeyIndex: 2, SLID: 5, SL: 1, DLIDPathBits: 2, Port: 1}
	if wc[0] != want {
		t.Errorf("completion\n got %+v\nwant %+v", wc[0], want)
	}
	if wc[1].Imm != 0x1234 || wc[1].Flags != provider.WCWithInv|provider.WCIPCSumOK {
		t.Errorf("invalidate completion %+v", wc[1])
	}
	if kq.cons.Load() != 2 {
		t.Errorf("consumer index %d after 2 polled", kq.cons.Load())
	}
	n, _ = cq.Poll(wc[:])
	if n != 1 || wc[0].Status != provider.WCRemAccessErr || wc[0].VendorErr != 9 || wc[0].Opcode != provider.WCRDMAWrite {
		t.Errorf("third completion: n=%d %+v", n, wc[0])
	}
	// Wrap around several times.
	id := uint64(100)
	next := uint64(100)
	for round := 0; round < 20; round++ {
		for i := 0; i < 5; i++ {
			putWC(kq, abi.IbUverbsWc{WrId: id})
			id++
		}
		for got := 0; got < 5; {
			n, _ := cq.Poll(wc[:])
			for _, w := range wc[:n] {
				if w.ID != next {
					t.Fatalf("completion %d, want %d", w.ID, next)
				}
				next++
			}
			got += n
		}
	}
	if err := cq.Arm(true); err != nil || len(fk.notifies) != 1 || fk.notifies[0] != 3 {
		t.Errorf("Arm: %v, notifies %v", err, fk.notifies)
	}
}

func TestCQResizeRemaps(t *testing.T) {
	fk, c := testContext(t)
	cq, kq := testCQ(t, fk, c, 4, 7)
	putWC(kq, abi.IbUverbsWc{WrId: 1})
	st, nq := beginResize(t, fk, cq)
	putWC(nq, abi.IbUverbsWc{WrId: 1}) // the kernel copied the unpolled entry
	putWC(nq, abi.IbUverbsWc{WrId: 2})
	if _, err := st.Complete(31); err != nil {
		t.Fatal(err)
	}
	var wc [8]provider.WorkCompletion
	if n, _ := cq.Poll(wc[:]); n != 2 || wc[0].ID != 1 || wc[1].ID != 2 {
		t.Errorf("after resize: %d completions %+v", n, wc[:n])
	}
	if err := cq.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cq.Poll(wc[:]); err == nil {
		t.Errorf("Poll after Close succeeded")
	}
}

// beginResize starts resizing cq to 31 entries: the kernel's answer names
// a new queue of 32 slots of 128 bytes, which it returns with the setup to
// complete (Complete(31)) once the test has filled it.
func beginResize(t *testing.T, fk *fakeRXE, cq *CQ) (provider.Setup[uint32, struct{}], *queue) {
	t.Helper()
	st, err := cq.Resize(30)
	if err != nil {
		t.Fatal(err)
	}
	_, out := st.Udata()
	mi := fk.addQueue(32, 7)
	putMI(out, mi)
	return st, fk.queueAt(mi)
}

// TestQueueHeaderChecks feeds mapQueue headers a broken kernel could send.
func TestQueueHeaderChecks(t *testing.T) {
	r, err := mmap.Anonymous(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, c := range []struct {
		log2, mask uint32
		ok         bool
	}{
		{7, 15, true}, {7, 29, false}, {7, 0, false}, {4, 3, false} /* slot under 48 bytes */, {9, 15, false}, /* too big */
		{31, 1, false},
	} {
		ne.PutUint32(r.Bytes()[0:], c.log2)
		ne.PutUint32(r.Bytes()[4:], c.mask)
		_, err := newQueue(r.Bytes(), "test", wcSize)
		if (err == nil) != c.ok {
			t.Errorf("log2 %d mask %d: %v", c.log2, c.mask, err)
		}
	}
}

// TestConcurrentPostSend has several goroutines post to one QP while a fake
// kernel consumes at each doorbell; every request must land in exactly one
// slot (run with -race).
func TestConcurrentPostSend(t *testing.T) {
	fk, c := testContext(t)
	qp := testQP(t, fk, c, qpSpec{sqSlots: 64, sqLog2: 8})
	q := qp.sq.q
	seen := map[uint64]int{}
	var mu sync.Mutex
	// The kernel: take everything up to the producer.
	fk.onDoorbell = func(uint32) {
		mu.Lock()
		defer mu.Unlock()
		cons := q.cons.Load()
		prod := q.prod.Load()
		for ; cons != prod; cons = (cons + 1) & q.mask {
			seen[q.sendWQE(cons).Wr.WrId]++
		}
		q.cons.Store(cons)
	}
	const workers, per = 4, 2000
	var wg sync.WaitGroup
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			wrs := make([]provider.SendWR, 3)
			for i := 0; i < per; i++ {
				for j := range wrs {
					wrs[j] = provider.SendWR{ID: uint64(g)<<32 | uint64(i*3+j), Opcode: provider.WRSend}
				}
				for {
					_, err := qp.PostSend(wrs)
					if err == nil {
						break
					}
					if !errors.Is(err, unix.ENOMEM) {
						t.Error(err)
						return
					}
				}
			}
		}(g)
	}
	wg.Wait()
	if len(seen) != workers*per*3 {
		t.Errorf("%d distinct requests consumed, want %d", len(seen), workers*per*3)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("request %#x consumed %d times", id, n)
		}
	}
}

// TestFastPathAllocs: posting and polling allocate nothing.
func TestFastPathAllocs(t *testing.T) {
	fk, c := testContext(t)
	qp := testQP(t, fk, c, qpSpec{typ: provider.QPTypeRC, cap: provider.QPCap{MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}})
	sq, rq := qp.sq.q, qp.rq.q
	fk.onDoorbell = func(uint32) { sq.cons.Store(sq.prod.Load()) }
	buf, _ := mmap.Anonymous(4096)
	defer buf.Close()
	send := []provider.SendWR{
		{ID: 1, Opcode: provider.WRSend, Flags: provider.SendSignaled, SGL: []provider.SGE{{Addr: uint64(buf.Addr()), Length: 8, LKey: 1}}},
		{ID: 2, Opcode: provider.WRSend, Flags: provider.SendInline, SGL: []provider.SGE{{Addr: uint64(buf.Addr()), Length: 8}}},
	}
	if a := testing.AllocsPerRun(1000, func() {
		if _, err := qp.PostSend(send); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("PostSend: %v allocs/op", a)
	}
	for i := range send { // each alone: the plain path (send_plain.go)
		if !qp.sq.isPlain(&send[i]) {
			t.Fatalf("WR %d is not plain", i)
		}
		if a := testing.AllocsPerRun(1000, func() {
			if _, err := qp.PostSend(send[i : i+1]); err != nil {
				t.Fatal(err)
			}
		}); a != 0 {
			t.Errorf("PostSend of plain WR %d: %v allocs/op", i, a)
		}
	}
	recv := []provider.RecvWR{{ID: 1, SGL: []provider.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}, {ID: 2}}
	for _, list := range [][]provider.RecvWR{recv[:1], recv} { // alone: postOne; a list: post
		if a := testing.AllocsPerRun(1000, func() {
			if _, err := qp.PostRecv(list); err != nil {
				t.Fatal(err)
			}
			rq.cons.Store(rq.prod.Load())
		}); a != 0 {
			t.Errorf("PostRecv of %d: %v allocs/op", len(list), a)
		}
	}
	cq, kq := testCQ(t, fk, c, 16, 7)
	var wc [4]provider.WorkCompletion
	if a := testing.AllocsPerRun(1000, func() {
		putWC(kq, abi.IbUverbsWc{WrId: 1})
		putWC(kq, abi.IbUverbsWc{WrId: 2})
		if n, err := cq.Poll(wc[:]); n != 2 || err != nil {
			t.Fatalf("Poll = %d, %v", n, err)
		}
	}); a != 0 {
		t.Errorf("Poll: %v allocs/op", a)
	}
}

func FuzzToWC(f *testing.F) {
	f.Add(make([]byte, wcSize))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 128, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef, 17, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var k abi.IbUverbsWc
		copy(abi.Bytes(&k), b)
		var w provider.WorkCompletion
		if !toWC(&w, &k) {
			toWCFlags(&w, &k)
		}
		if w.ID != k.WrId || uint32(w.Status) != k.Status || uint32(w.Opcode) != k.Opcode || w.ByteLen != k.ByteLen {
			t.Fatalf("fields lost: %+v from %+v", w, k)
		}
		if (w.Flags&provider.WCWithImm != 0) != (k.WcFlags&kwcWithImm != 0) {
			t.Fatalf("imm flag: %+v from %+v", w, k)
		}
		if k.WcFlags&kwcWithImm != 0 && w.Imm != binary.BigEndian.Uint32(k.Ex[:]) {
			t.Fatalf("imm %#x from % x", w.Imm, k.Ex)
		}
		if k.WcFlags&(kwcWithImm|kwcWithInv) == 0 && w.Imm != 0 {
			t.Fatalf("imm %#x without an immediate or an invalidation (flags %#x)", w.Imm, k.WcFlags)
		}
		var want provider.WCFlags
		for _, m := range []struct {
			k uint32
			p provider.WCFlags
		}{{kwcGRH, provider.WCWithGRH}, {kwcWithImm, provider.WCWithImm}, {kwcIPCSumOK, provider.WCIPCSumOK}} {
			if k.WcFlags&m.k != 0 {
				want |= m.p
			}
		}
		if k.WcFlags&kwcWithInv != 0 && k.WcFlags&kwcWithImm == 0 {
			want |= provider.WCWithInv
		}
		if w.Flags != want {
			t.Fatalf("flags %#x from the kernel's %#x, want %#x", w.Flags, k.WcFlags, want)
		}
		if w.QPNum != k.QpNum || w.SrcQP != k.SrcQp || w.VendorErr != k.VendorErr || w.PKeyIndex != k.PkeyIndex ||
			w.SLID != k.Slid || w.SL != k.Sl || w.DLIDPathBits != k.DlidPathBits || w.Port != k.PortNum {
			t.Fatalf("fields lost: %+v from %+v", w, k)
		}
	})
}
