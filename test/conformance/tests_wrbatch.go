package conformance

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// testWRBatch: the extended QP's posting API (ibv_wr_start, ibv_wr_*,
// ibv_wr_complete) as uverbs.WRBatch: one batch of every RC opcode with
// every way of giving data (one SGE, an SGE list, inline data) is posted
// with one doorbell and completes in order with the right opcodes, bytes
// and immediate data. Aborted and refused batches post nothing; a batch
// allocates nothing.
func testWRBatch(t *testing.T, e *env) {
	a, b := e.pair(t, qpConfig{cap: uverbs.QPCap{MaxSendWR: 64, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 1, MaxInlineData: 64}, cqe: 256})
	ca, cb := a.side.ctx, b.side.ctx
	syscalls := func() uint64 {
		if ca == cb {
			return ca.Syscalls()
		}
		return ca.Syscalls() + cb.Syscalls()
	}
	src, err := mmap.Anonymous(4096) // inline data: plain memory, not registered
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	fill(src.Bytes()[:48], 40)
	fill(a.buf.bytes()[:512], 41)
	fill(b.buf.bytes()[32768:32768+64], 42)
	ne.PutUint64(b.buf.bytes()[40960:], 100)
	ne.PutUint64(b.buf.bytes()[40968:], 7)
	for i := range 3 {
		postRecv(t, b.qp, uverbs.RecvWR{ID: 0xB0 + uint64(i), SGL: []uverbs.SGE{b.buf.sge(4096*(i+1), 256)}})
	}
	rk, lk := b.buf.mr.RKey(), a.buf.mr.LKey()
	sig := uverbs.SendSignaled
	if e.o.IWARP {
		wrBatchIWARP(t, e, a, b, src, syscalls)
	} else {
		wrBatchAll(t, e, a, b, src, syscalls)
	}

	// Aborted, refused by the builder, over-full: nothing is posted.
	wb := a.qp.StartWR()
	wb.Send(10, sig).SetSGE(lk, a.buf.addr(0), 8)
	wb.Abort()
	if err := wb.Complete(); err == nil {
		t.Error("Complete after Abort succeeded")
	}
	wb = a.qp.StartWR()
	wb.Send(11, sig).SetSGE(lk, a.buf.addr(0), 8)
	over := int(a.qp.Cap().MaxSendSGE) + 1 // as the kernel sized the QP (rxe rounds up)
	wb.Send(12, sig).SetSGEList(make([]uverbs.SGE, over))
	if err := wb.Complete(); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a batch with %d SGEs on a %d-SGE QP: %v, want EINVAL", over, over-1, err)
	}
	wb = a.qp.StartWR()
	wb.SetSGE(lk, a.buf.addr(0), 8) // data before an opcode
	if err := wb.Complete(); !errors.Is(err, unix.EINVAL) {
		t.Errorf("SetSGE before an opcode: %v, want EINVAL", err)
	}
	wb = a.qp.StartWR()
	for i := range int(a.qp.Cap().MaxSendWR) + 1 {
		wb.Send(uint64(100+i), sig).SetSGE(lk, a.buf.addr(0), 8)
	}
	if err := wb.Complete(); !errors.Is(err, unix.ENOMEM) {
		t.Errorf("a batch deeper than the send queue: %v, want ENOMEM", err)
	}
	quiet(t, a.cq, 20*time.Millisecond)
	quiet(t, b.cq, 20*time.Millisecond)

	// Building and completing allocate nothing.
	const runs = 40
	if n := e.allocsPerRun(runs, func() {
		wb := a.qp.StartWR()
		wb.RDMAWrite(20, sig, rk, b.buf.addr(24576)).SetSGE(lk, a.buf.addr(0), 16)
		if err := wb.Complete(); err != nil {
			t.Fatalf("Complete: %v", err)
		}
	}); n != 0 {
		t.Errorf("a batch of one write: %v allocations", n)
	}
	for _, w := range e.wait(t, a.cq, runs+1) {
		expect(t, w, 20, uverbs.WCSuccess, uverbs.WCRDMAWrite)
	}
}

// testWRBatchUD: a batch on a UD QP (ibv_wr_set_ud_addr): two sends, one
// with immediate data, to the peer's QP through an address handle; a
// request left without an address is refused with nothing posted, and an
// RDMA opcode, which UD does not have, likewise.
func testWRBatchUD(t *testing.T, e *env) {
	const qkey = 0x11111111
	a, b, ah, ok := e.udPair(t, qkey)
	if !ok {
		return
	}
	const grh = 40
	fill(a.buf.bytes()[:200], 12)
	postRecv(t, b.qp, uverbs.RecvWR{ID: 0xB1, SGL: []uverbs.SGE{b.buf.sge(0, grh+256)}},
		uverbs.RecvWR{ID: 0xB2, SGL: []uverbs.SGE{b.buf.sge(4096, grh+256)}})
	lk := a.buf.mr.LKey()
	wb := a.qp.StartWR()
	wb.Send(1, uverbs.SendSignaled).SetUDAddr(ah, b.qp.QPN(), qkey).SetSGE(lk, a.buf.addr(0), 100)
	wb.SendWithImm(2, uverbs.SendSignaled, 0xbeef).SetUDAddr(ah, b.qp.QPN(), qkey).SetSGE(lk, a.buf.addr(100), 60)
	if err := wb.Complete(); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	s := e.wait(t, a.cq, 2)
	expect(t, s[0], 1, uverbs.WCSuccess, uverbs.WCSend)
	expect(t, s[1], 2, uverbs.WCSuccess, uverbs.WCSend)
	r := e.wait(t, b.cq, 2)
	hdr := uint32(grh)
	if e.o.LIDRouted {
		hdr = 0
	}
	if r[0].ID != 0xB1 || r[0].ByteLen != hdr+100 || r[0].SrcQP != a.qp.QPN() || r[1].ID != 0xB2 || r[1].ByteLen != hdr+60 ||
		r[1].Flags&uverbs.WCWithImm == 0 || r[1].Imm != 0xbeef {
		t.Errorf("UD receives %s", fmtWCs(r))
	}
	if !bytes.Equal(b.buf.bytes()[grh:grh+100], a.buf.bytes()[:100]) || !bytes.Equal(b.buf.bytes()[4096+grh:4096+grh+60], a.buf.bytes()[100:160]) {
		t.Error("UD payloads differ")
	}
	wb = a.qp.StartWR()
	wb.Send(3, uverbs.SendSignaled).SetUDAddr(nil, b.qp.QPN(), qkey).SetSGE(lk, a.buf.addr(0), 8)
	if err := wb.Complete(); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a UD send without an address handle: %v, want EINVAL", err)
	}
	wb = a.qp.StartWR()
	wb.Send(4, uverbs.SendSignaled).SetUDAddr(ah, b.qp.QPN(), qkey).SetSGE(lk, a.buf.addr(0), 8)
	wb.RDMAWrite(5, uverbs.SendSignaled, 1, 0).SetUDAddr(ah, b.qp.QPN(), qkey).SetSGE(lk, a.buf.addr(0), 8)
	if err := wb.Complete(); err == nil {
		t.Error("an RDMA WRITE in a UD batch was accepted")
	}
	quiet(t, a.cq, 20*time.Millisecond)
	quiet(t, b.cq, 20*time.Millisecond)
}

// testAHFromWC: a UD receiver answers the sender through the address
// made from the receive's completion and GRH (ibv_create_ah_from_wc): the
// answer arrives, and the address names the sender's GID and the
// receiver's own GID index (or, LID-routed, the sender's LID).
func testAHFromWC(t *testing.T, e *env) {
	const qkey = 0x22222222
	a, b, ah, ok := e.udPair(t, qkey)
	if !ok {
		return
	}
	postRecv(t, b.qp, uverbs.RecvWR{ID: 1, SGL: []uverbs.SGE{b.buf.sge(0, uverbs.GRHLen+64)}})
	postRecv(t, a.qp, uverbs.RecvWR{ID: 2, SGL: []uverbs.SGE{a.buf.sge(8192, uverbs.GRHLen+64)}})
	fill(a.buf.bytes()[:32], 13)
	post(t, a.qp, uverbs.SendWR{ID: 3, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.buf.sge(0, 32)},
		UD: uverbs.UDDest{AH: ah, RemoteQPN: b.qp.QPN(), QKey: qkey}})
	e.wait(t, a.cq, 1)
	rw := e.wait(t, b.cq, 1)[0]
	expect(t, rw, 1, uverbs.WCSuccess, uverbs.WCRecv)
	attr, err := e.b.ctx.InitAHFromWC(int(e.o.Port), &rw, b.buf.bytes()[:uverbs.GRHLen])
	if err != nil {
		t.Fatalf("InitAHFromWC: %v (completion %s, GRH % x)", err, fmtWC(rw), b.buf.bytes()[:uverbs.GRHLen])
	}
	switch {
	case e.o.LIDRouted && (attr.GRH != nil || attr.DLID != e.a.lid):
		t.Errorf("address from a LID-routed receive %+v, want DLID %d and no GRH", attr, e.a.lid)
	case !e.o.LIDRouted && (attr.GRH == nil || attr.GRH.DGID != e.a.gid || attr.GRH.SGIDIndex != e.b.gidIndex):
		t.Errorf("address from the receive %+v (GRH %+v), want DGID %x and SGID index %d", attr, attr.GRH, e.a.gid, e.b.gidIndex)
	}
	back, err := e.b.pd.CreateAHFromWC(int(e.o.Port), &rw, b.buf.bytes()[:uverbs.GRHLen])
	if err != nil {
		t.Fatalf("CreateAHFromWC: %v", err)
	}
	t.Cleanup(func() { back.Close() })
	fill(b.buf.bytes()[4096:4096+24], 14)
	post(t, b.qp, uverbs.SendWR{ID: 4, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{b.buf.sge(4096, 24)},
		UD: uverbs.UDDest{AH: back, RemoteQPN: rw.SrcQP, QKey: qkey}})
	expect(t, e.wait(t, b.cq, 1)[0], 4, uverbs.WCSuccess, uverbs.WCSend)
	aw := e.wait(t, a.cq, 1)[0]
	expect(t, aw, 2, uverbs.WCSuccess, uverbs.WCRecv)
	if aw.SrcQP != b.qp.QPN() || !bytes.Equal(a.buf.bytes()[8192+uverbs.GRHLen:8192+uverbs.GRHLen+24], b.buf.bytes()[4096:4096+24]) {
		t.Errorf("the answer %s from QP %d, payload as sent: %v", fmtWC(aw), aw.SrcQP,
			bytes.Equal(a.buf.bytes()[8192+uverbs.GRHLen:8192+uverbs.GRHLen+24], b.buf.bytes()[4096:4096+24]))
	}
	bad := rw
	bad.Flags |= uverbs.WCWithGRH
	grh := make([]byte, uverbs.GRHLen)
	grh[0] = 0x60
	grh[6] = 0x3a // ICMPv6: neither UDP nor the BTH
	if _, err := e.b.ctx.InitAHFromWC(int(e.o.Port), &bad, grh); !errors.Is(err, unix.EPROTONOSUPPORT) {
		t.Errorf("a GRH with next header 0x3a: %v, want EPROTONOSUPPORT", err)
	}
	grh[6], grh[24] = 17, 0xff
	if _, err := e.b.ctx.InitAHFromWC(int(e.o.Port), &bad, grh); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a GRH to a multicast GID: %v, want EINVAL", err)
	}
}

// wrBatchAll posts one batch of every RC opcode with every way of giving
// data and checks what lands (testWRBatch on IB and RoCE).
func wrBatchAll(t *testing.T, e *env, a, b *end, src *mmap.Region, syscalls func() uint64) {
	rk, lk := b.buf.mr.RKey(), a.buf.mr.LKey()
	sig := uverbs.SendSignaled
	wb := a.qp.StartWR()
	wb.RDMAWrite(1, sig, rk, b.buf.addr(16384)).SetSGEList([]uverbs.SGE{a.buf.sge(0, 100), a.buf.sge(200, 50)})
	wb.Send(2, sig).SetSGE(lk, a.buf.addr(0), 64)
	wb.SendWithImm(3, sig, 0xfeedf00d).SetInlineData(uint64(src.Addr()), 48)
	wb.RDMAWriteWithImm(4, sig, rk, b.buf.addr(20480), 0x5a5a).SetSGE(lk, a.buf.addr(300), 32)
	wb.RDMARead(5, sig, rk, b.buf.addr(32768)).SetSGE(lk, a.buf.addr(8192), 64)
	// no atomics across a pair where the kernel did not ACK one (atomicsUnACKed)
	atomics, n := !e.atomicsUnACKed(t), 5
	if atomics {
		wb.AtomicFetchAdd(6, sig, rk, b.buf.addr(40960), 5).SetSGE(lk, a.buf.addr(12288), 8)
		wb.AtomicCmpSwp(7, sig, rk, b.buf.addr(40968), 7, 9).SetSGE(lk, a.buf.addr(12296), 8)
		n = 7
	}
	if wb.Len() != n {
		t.Fatalf("the batch holds %d requests, want %d", wb.Len(), n)
	}
	src.Bytes()[0] ^= 0xff // inline data is copied at Complete: this change travels
	want := append([]byte(nil), src.Bytes()[:48]...)
	before := syscalls()
	if err := wb.Complete(); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if d := syscalls() - before; d != uint64(e.o.DoorbellsPerPostSend) {
		t.Errorf("Complete of %d requests made %d syscalls, want %d", n, d, e.o.DoorbellsPerPostSend)
	}
	sends := e.wait(t, a.cq, n)
	for i, op := range []uverbs.WCOpcode{uverbs.WCRDMAWrite, uverbs.WCSend, uverbs.WCSend, uverbs.WCRDMAWrite,
		uverbs.WCRDMARead, uverbs.WCFetchAdd, uverbs.WCCompSwap}[:n] {
		expect(t, sends[i], uint64(i+1), uverbs.WCSuccess, op)
	}
	recvs := e.wait(t, b.cq, 3)
	expect(t, recvs[0], 0xB0, uverbs.WCSuccess, uverbs.WCRecv)
	expect(t, recvs[1], 0xB1, uverbs.WCSuccess, uverbs.WCRecv)
	expect(t, recvs[2], 0xB2, uverbs.WCSuccess, uverbs.WCRecvRDMAWithImm)
	if recvs[0].ByteLen != 64 || recvs[1].ByteLen != 48 || recvs[1].Flags&uverbs.WCWithImm == 0 || recvs[1].Imm != 0xfeedf00d ||
		recvs[2].ByteLen != 32 || recvs[2].Imm != 0x5a5a {
		t.Errorf("receive completions %s", fmtWCs(recvs))
	}
	batchLanded(t, a, b, want)
	bb, ab := b.buf.bytes(), a.buf.bytes()
	switch {
	case !bytes.Equal(bb[20480:20480+32], ab[300:332]):
		t.Error("the write with immediate's bytes differ")
	case atomics && (ne.Uint64(ab[12288:]) != 100 || ne.Uint64(bb[40960:]) != 105):
		t.Errorf("fetch-and-add: old %d (want 100), now %d (want 105)", ne.Uint64(ab[12288:]), ne.Uint64(bb[40960:]))
	case atomics && (ne.Uint64(ab[12296:]) != 7 || ne.Uint64(bb[40968:]) != 9):
		t.Errorf("compare-and-swap: old %d (want 7), now %d (want 9)", ne.Uint64(ab[12296:]), ne.Uint64(bb[40968:]))
	}
}

// batchLanded checks the bytes a batch's SGE-list write (two pieces to
// 16384), send (to the receive at 4096), inline send (inline, to the
// receive at 8192) and read (from 32768 to 8192) moved.
func batchLanded(t *testing.T, a, b *end, inline []byte) {
	t.Helper()
	bb, ab := b.buf.bytes(), a.buf.bytes()
	switch {
	case !bytes.Equal(bb[16384:16484], ab[:100]) || !bytes.Equal(bb[16484:16534], ab[200:250]):
		t.Error("the SGE-list write did not land as two pieces back to back")
	case !bytes.Equal(bb[4096:4096+64], ab[:64]):
		t.Error("the send's bytes differ")
	case !bytes.Equal(bb[8192:8192+48], inline):
		t.Error("the inline send's bytes differ from the source at Complete")
	case !bytes.Equal(ab[8192:8192+64], bb[32768:32768+64]):
		t.Error("the read's bytes differ")
	}
}

// wrBatchIWARP is wrBatchAll with the opcodes iWARP has: no immediate
// data (RFC 5040) and no atomics on siw. A batch holding a request the
// transport lacks is refused whole, with nothing posted.
func wrBatchIWARP(t *testing.T, e *env, a, b *end, src *mmap.Region, syscalls func() uint64) {
	rk, lk := b.buf.mr.RKey(), a.buf.mr.LKey()
	sig := uverbs.SendSignaled
	wb := a.qp.StartWR()
	wb.Send(1, sig).SetSGE(lk, a.buf.addr(0), 64)
	wb.SendWithImm(2, sig, 0xfeedf00d).SetSGE(lk, a.buf.addr(0), 8)
	if err := wb.Complete(); !errors.Is(err, uverbs.ErrNotSupported) {
		t.Errorf("a batch with a send with immediate data on iWARP: %v, want ErrNotSupported", err)
	}
	quiet(t, a.cq, 20*time.Millisecond)

	wb = a.qp.StartWR()
	wb.RDMAWrite(1, sig, rk, b.buf.addr(16384)).SetSGEList([]uverbs.SGE{a.buf.sge(0, 100), a.buf.sge(200, 50)})
	wb.Send(2, sig).SetSGE(lk, a.buf.addr(0), 64)
	wb.Send(3, sig).SetInlineData(uint64(src.Addr()), 48)
	wb.RDMARead(4, sig, rk, b.buf.addr(32768)).SetSGE(lk, a.buf.addr(8192), 64)
	src.Bytes()[0] ^= 0xff // inline data is copied at Complete: this change travels
	want := append([]byte(nil), src.Bytes()[:48]...)
	before := syscalls()
	if err := wb.Complete(); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if d := syscalls() - before; d > uint64(e.o.DoorbellsPerPostSend) {
		t.Errorf("Complete of 4 requests made %d syscalls, want at most %d", d, e.o.DoorbellsPerPostSend)
	}
	sends := e.wait(t, a.cq, 4)
	for i, op := range []uverbs.WCOpcode{uverbs.WCRDMAWrite, uverbs.WCSend, uverbs.WCSend, uverbs.WCRDMARead} {
		expect(t, sends[i], uint64(i+1), uverbs.WCSuccess, op)
	}
	recvs := e.wait(t, b.cq, 2)
	expect(t, recvs[0], 0xB0, uverbs.WCSuccess, uverbs.WCRecv)
	expect(t, recvs[1], 0xB1, uverbs.WCSuccess, uverbs.WCRecv)
	if recvs[0].ByteLen != 64 || recvs[1].ByteLen != 48 {
		t.Errorf("receive completions %s", fmtWCs(recvs))
	}
	batchLanded(t, a, b, want)
}
