package conformance

import (
	"bytes"
	"testing"
	"time"

	"github.com/goverbs/goverbs/uverbs"
)

func testSRQ(t *testing.T, e *env) {
	srq, err := e.b.pd.CreateSRQ(uverbs.SRQInit{MaxWR: 32, MaxSGE: 1})
	if err != nil {
		t.Fatalf("CreateSRQ: %v", err)
	}
	t.Cleanup(func() { srq.Close() })
	var senders, receivers []*end
	for i := 0; i < 2; i++ {
		a := e.newEnd(t, e.a, qpConfig{})
		b := e.newEnd(t, e.b, qpConfig{srq: srq})
		e.link(t, a, b, qpConfig{})
		senders, receivers = append(senders, a), append(receivers, b)
	}
	buf := e.b.buffer(t, 8192)
	var recvs []uverbs.RecvWR
	for i := 0; i < 6; i++ {
		recvs = append(recvs, uverbs.RecvWR{ID: uint64(0x50 + i), SGL: []uverbs.SGE{buf.sge(i*1024, 1024)}})
	}
	if n, err := srq.PostRecv(recvs); n != 6 || err != nil {
		t.Fatalf("SRQ PostRecv = %d, %v", n, err)
	}
	if _, err := receivers[0].qp.PostRecv(recvs[:1]); err == nil {
		t.Errorf("PostRecv on a QP that receives through an SRQ succeeded")
	}
	post(t, senders[0].qp, sendList(senders[0], []uint64{1, 2}, uverbs.SendSignaled)...)
	post(t, senders[1].qp, sendList(senders[1], []uint64{3, 4, 5}, uverbs.SendSignaled)...)
	e.wait(t, senders[0].cq, 2)
	e.wait(t, senders[1].cq, 3)
	used := map[uint64]bool{}
	for i, want := range []int{2, 3} {
		for _, w := range e.wait(t, receivers[i].cq, want) {
			if w.Status != uverbs.WCSuccess || w.Opcode != uverbs.WCRecv || w.QPNum != receivers[i].qp.QPN() || w.ID < 0x50 || w.ID > 0x55 || used[w.ID] {
				t.Errorf("receiver %d: completion %s", i, fmtWC(w))
			}
			used[w.ID] = true
		}
	}
	quiet(t, receivers[0].cq, 10*time.Millisecond)
}

// transportRefuses checks that the device refuses to create a QP of type
// typ (iWARP carries RC only).
func transportRefuses(t *testing.T, e *env, typ uverbs.QPType) {
	t.Helper()
	cq, err := e.a.ctx.CreateCQ(16, uverbs.CQOptions{})
	if err != nil {
		t.Fatalf("CreateCQ: %v", err)
	}
	t.Cleanup(func() { cq.Close() })
	qp, err := e.a.pd.CreateQP(uverbs.QPInit{Type: typ, SendCQ: cq, RecvCQ: cq, Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err == nil {
		qp.Close()
		t.Fatalf("CreateQP(%v) succeeded on an iWARP device", typ)
	}
	t.Logf("CreateQP(%v) refused on iWARP: %v", typ, err)
}

// udPair makes two UD QPs with qkey, one per side, and an AH from a to b;
// on iWARP, which has no UD, it checks the refusal and reports false.
func (e *env) udPair(t *testing.T, qkey uint32) (a, b *end, ah *uverbs.AH, ok bool) {
	t.Helper()
	if e.o.IWARP {
		transportRefuses(t, e, uverbs.QPTypeUD)
		return nil, nil, nil, false
	}
	cfg := qpConfig{typ: uverbs.QPTypeUD}
	a, b = e.newEnd(t, e.a, cfg), e.newEnd(t, e.b, cfg)
	e.connectUD(t, a.qp, qkey)
	e.connectUD(t, b.qp, qkey)
	ah, err := e.a.pd.CreateAH(e.av(e.a, e.b))
	if err != nil {
		t.Fatalf("CreateAH: %v", err)
	}
	t.Cleanup(func() { ah.Close() })
	return a, b, ah, true
}

func testUD(t *testing.T, e *env) {
	const qkey = 0x11111111
	a, b, ah, ok := e.udPair(t, qkey)
	if !ok {
		return
	}
	const grh = 40 // a UD receive buffer starts with room for the GRH
	fill(a.buf.bytes()[:100], 7)
	postRecv(t, b.qp, uverbs.RecvWR{ID: 0xB9, SGL: []uverbs.SGE{b.buf.sge(0, grh+256)}})
	post(t, a.qp, uverbs.SendWR{ID: 0xA9, Opcode: uverbs.WRSendWithImm, Imm: 0xcafe, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{a.buf.sge(0, 100)}, UD: uverbs.UDDest{AH: ah, RemoteQPN: b.qp.QPN(), QKey: qkey}})
	expect(t, e.wait(t, a.cq, 1)[0], 0xA9, uverbs.WCSuccess, uverbs.WCSend)
	rw := e.wait(t, b.cq, 1)[0]
	expect(t, rw, 0xB9, uverbs.WCSuccess, uverbs.WCRecv)
	wantLen := uint32(100)
	if !e.o.LIDRouted {
		wantLen += grh
		if rw.Flags&uverbs.WCWithGRH == 0 {
			t.Errorf("UD receive over a GRH route without WCWithGRH: %s", fmtWC(rw))
		}
	}
	if rw.ByteLen != wantLen || rw.SrcQP != a.qp.QPN() || rw.Flags&uverbs.WCWithImm == 0 || rw.Imm != 0xcafe {
		t.Errorf("UD receive %s (src_qp %d), want %d bytes from QP %d with immediate 0xcafe", fmtWC(rw), rw.SrcQP, wantLen, a.qp.QPN())
	}
	if !bytes.Equal(b.buf.bytes()[grh:grh+100], a.buf.bytes()[:100]) {
		t.Errorf("UD payload differs")
	}
	// RDMA operations do not exist on UD: refused at post time.
	if n, err := a.qp.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRRDMAWrite, UD: uverbs.UDDest{AH: ah}}}); err == nil || n != 0 {
		t.Errorf("RDMA WRITE on a UD QP: %d, %v; want an error at index 0", n, err)
	}
}

func testUC(t *testing.T, e *env) {
	if e.o.IWARP {
		transportRefuses(t, e, uverbs.QPTypeUC)
		return
	}
	a, b := e.pair(t, qpConfig{typ: uverbs.QPTypeUC})
	fill(a.buf.bytes()[:64], 8)
	post(t, a.qp, uverbs.SendWR{ID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		RemoteAddr: b.buf.addr(4096), RKey: b.buf.mr.RKey(), SGL: []uverbs.SGE{a.buf.sge(0, 64)}})
	expect(t, e.wait(t, a.cq, 1)[0], 1, uverbs.WCSuccess, uverbs.WCRDMAWrite)
	postRecv(t, b.qp, uverbs.RecvWR{ID: 0xB1, SGL: []uverbs.SGE{b.buf.sge(0, 64)}})
	post(t, a.qp, uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.buf.sge(0, 64)}})
	expect(t, e.wait(t, a.cq, 1)[0], 2, uverbs.WCSuccess, uverbs.WCSend)
	expect(t, e.wait(t, b.cq, 1)[0], 0xB1, uverbs.WCSuccess, uverbs.WCRecv)
	if !bytes.Equal(b.buf.bytes()[4096:4096+64], a.buf.bytes()[:64]) || !bytes.Equal(b.buf.bytes()[:64], a.buf.bytes()[:64]) {
		t.Errorf("UC data differs")
	}
	for _, op := range []uverbs.WROpcode{uverbs.WRRDMARead, uverbs.WRAtomicFetchAndAdd} {
		wr := uverbs.SendWR{Opcode: op, RemoteAddr: b.buf.addr(0), RKey: b.buf.mr.RKey(), SGL: []uverbs.SGE{a.buf.sge(0, 8)}}
		if n, err := a.qp.PostSend([]uverbs.SendWR{wr}); err == nil || n != 0 {
			t.Errorf("%v on a UC QP: %d, %v; want an error at index 0", op, n, err)
		}
	}
}
