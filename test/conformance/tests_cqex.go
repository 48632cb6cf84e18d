package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/uverbs"
)

// passed is one completion as a CQPoll pass read it, field by field
// through the accessors (ibv_wc_read_*).
type passed struct {
	id        uint64
	status    uverbs.WCStatus
	opcode    uverbs.WCOpcode
	byteLen   uint32
	imm       uint32
	qpNum     uint32
	flags     uverbs.WCFlags
	timestamp uint64
}

// pass reads up to max completions in one CQPoll pass and ends it.
func pass(t *testing.T, cq *uverbs.CQ, max int) []passed {
	t.Helper()
	var got []passed
	p := cq.StartPoll()
	for len(got) < max && p.Next() {
		got = append(got, passed{p.ID(), p.Status(), p.Opcode(), p.ByteLen(), p.Imm(), p.QPNum(), p.Flags(), p.Timestamp()})
		if *p.WC() != (uverbs.WorkCompletion{ID: p.ID(), Status: p.Status(), Opcode: p.Opcode(), VendorErr: p.VendorErr(),
			ByteLen: p.ByteLen(), Imm: p.Imm(), QPNum: p.QPNum(), SrcQP: p.SrcQP(), Flags: p.Flags(),
			PKeyIndex: p.WC().PKeyIndex, SLID: p.SLID(), SL: p.SL(), DLIDPathBits: p.DLIDPathBits(), Port: p.WC().Port}) {
			t.Errorf("the accessors disagree with WC(): %s", fmtWC(*p.WC()))
		}
	}
	if p.Count() != len(got) {
		t.Errorf("the pass counted %d completions, read %d", p.Count(), len(got))
	}
	if err := p.End(); err != nil {
		t.Fatalf("CQPoll pass: %v", err)
	}
	return got
}

// passUntil runs passes until n completions came, or fails at the timeout.
func (e *env) passUntil(t *testing.T, cq *uverbs.CQ, n int) []passed {
	t.Helper()
	var got []passed
	deadline := time.Now().Add(e.o.Timeout)
	for len(got) < n {
		k := pass(t, cq, n-len(got))
		got = append(got, k...)
		if len(k) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d completions after %v", len(got), n, e.o.Timeout)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	return got
}

// testCQPoll: the extended CQ's pass (ibv_start_poll, ibv_next_poll,
// ibv_end_poll, ibv_wc_read_*) reads every field a completion has: a send,
// a send with immediate data and an RDMA write with immediate data, on
// both sides. A pass that stops early leaves the rest in the CQ; a pass
// allocates nothing; after Close a pass ends with ErrClosed.
func testCQPoll(t *testing.T, e *env) {
	a, b := e.pair(t, qpConfig{cap: uverbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}, cqe: 256})
	fill(a.buf.bytes()[:256], 9)
	wrs := []uverbs.SendWR{
		{ID: 0xA0, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.buf.sge(0, 64)}},
		{ID: 0xA1, Opcode: uverbs.WRSendWithImm, Imm: 0x12345678, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.buf.sge(0, 32)}},
		{ID: 0xA2, Opcode: uverbs.WRRDMAWriteWithImm, Imm: 0xabc, Flags: uverbs.SendSignaled,
			RemoteAddr: b.buf.addr(16384), RKey: b.buf.mr.RKey(), SGL: []uverbs.SGE{a.buf.sge(0, 100)}},
	}
	want := []passed{
		{id: 0xB0, opcode: uverbs.WCRecv, byteLen: 64},
		{id: 0xB1, opcode: uverbs.WCRecv, byteLen: 32, imm: 0x12345678, flags: uverbs.WCWithImm},
		{id: 0xB2, opcode: uverbs.WCRecvRDMAWithImm, byteLen: 100, imm: 0xabc, flags: uverbs.WCWithImm},
	}
	if e.o.IWARP {
		// iWARP has no immediate data (RFC 5040): the same requests
		// without it, so the write consumes no receive.
		refused(t, a.qp, wrs[1])
		wrs[1].Opcode, wrs[1].Imm = uverbs.WRSend, 0
		wrs[2].Opcode, wrs[2].Imm = uverbs.WRRDMAWrite, 0
		want = want[:2]
		want[1].imm, want[1].flags = 0, 0
	}
	for i := range want {
		postRecv(t, b.qp, uverbs.RecvWR{ID: 0xB0 + uint64(i), SGL: []uverbs.SGE{b.buf.sge(4096*i, 256)}})
	}
	post(t, a.qp, wrs...)
	sends := e.passUntil(t, a.cq, 3)
	for i, want := range []uverbs.WCOpcode{uverbs.WCSend, uverbs.WCSend, uverbs.WCRDMAWrite} {
		s := sends[i]
		if s.id != 0xA0+uint64(i) || s.status != uverbs.WCSuccess || s.opcode != want || s.qpNum != a.qp.QPN() || s.timestamp != 0 {
			t.Errorf("send completion %d: %+v, want id %#x %v success on QP %d, no timestamp", i, s, 0xA0+i, want, a.qp.QPN())
		}
	}
	// A first pass stops after one completion (whatever else is there
	// already); later passes find the other two: nothing is lost between.
	first := e.passUntil(t, b.cq, 1)
	recvs := append(first, e.passUntil(t, b.cq, len(want)-1)...)
	for i, w := range want {
		r := recvs[i]
		w.status, w.qpNum = uverbs.WCSuccess, b.qp.QPN()
		r.flags &= uverbs.WCWithImm | uverbs.WCWithInv // GRH and checksum flags depend on the transport
		if r != w {
			t.Errorf("receive completion %d: %+v, want %+v", i, r, w)
		}
	}
	if n := len(pass(t, b.cq, 10)); n != 0 {
		t.Errorf("a pass of an empty CQ read %d completions", n)
	}

	// A pass allocates nothing, empty or not.
	const runs = 50
	if n := e.allocsPerRun(runs, func() {
		p := b.cq.StartPoll()
		for p.Next() {
		}
		p.End()
	}); n != 0 {
		t.Errorf("a pass of an empty CQ: %v allocations", n)
	}
	// The receives complete before the sends that fed them are
	// acknowledged; the device (a model runs in this process) is quiet
	// while the passes run.
	for i := range runs + 1 {
		postRecv(t, b.qp, uverbs.RecvWR{ID: 100 + uint64(i), SGL: []uverbs.SGE{b.buf.sge(0, 64)}})
		post(t, a.qp, uverbs.SendWR{ID: 100 + uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{a.buf.sge(0, 8)}})
		e.wait(t, a.cq, 1)
	}
	time.Sleep(10 * time.Millisecond)
	got := 0
	deadline := time.Now().Add(e.o.Timeout)
	if n := e.allocsPerRun(runs, func() {
		for time.Now().Before(deadline) {
			p := b.cq.StartPoll()
			k := 0
			for k == 0 && p.Next() {
				k++
			}
			p.End()
			if got += k; k > 0 {
				return
			}
		}
	}); n != 0 {
		t.Errorf("a pass reading a completion: %v allocations", n)
	}
	if got != runs+1 {
		t.Errorf("the passes read %d receive completions, want %d", got, runs+1)
	}

	// After Close, a pass reads nothing and ends with ErrClosed.
	cq, err := e.a.ctx.CreateCQ(4, uverbs.CQOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cq.Close(); err != nil {
		t.Fatal(err)
	}
	p := cq.StartPoll()
	if p.Next() {
		t.Error("Next on a closed CQ returned a completion")
	}
	if err := p.End(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("a pass of a closed CQ ended with %v, want ErrClosed", err)
	}
}

// testCQTimestamps: a CQ created with CQOptions.Timestamps stamps each
// completion with the device's free-running clock (ibv_create_cq_ex with
// IBV_WC_EX_WITH_COMPLETION_TIMESTAMP). A device reporting no clock
// (completion_timestamp_mask 0: rxe, siw) refuses such a CQ with
// ErrNotSupported. Otherwise two sends 20 ms apart complete with
// timestamps whose difference, converted with hca_core_clock, lies between
// the time the test saw between them and the time around them.
func testCQTimestamps(t *testing.T, e *env) {
	attr, err := e.a.ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if attr.CompletionTimestampMask == 0 {
		cq, err := e.a.ctx.CreateCQ(16, uverbs.CQOptions{Timestamps: true})
		if err == nil {
			cq.Close()
			t.Fatalf("CreateCQ with timestamps succeeded on a device whose completion_timestamp_mask is 0")
		}
		if !errors.Is(err, uverbs.ErrNotSupported) {
			t.Fatalf("CreateCQ with timestamps: %v, want ErrNotSupported", err)
		}
		t.Logf("no completion clock: %v", err)
		return
	}
	if attr.HCACoreClock == 0 {
		t.Fatalf("completion_timestamp_mask %#x but hca_core_clock 0", attr.CompletionTimestampMask)
	}
	a, b := e.pair(t, qpConfig{timestamps: true})
	if !a.cq.Timestamps() {
		t.Fatal("CQ.Timestamps is false on a CQ created with timestamps")
	}
	postRecv(t, b.qp, uverbs.RecvWR{ID: 1, SGL: []uverbs.SGE{b.buf.sge(0, 64)}}, uverbs.RecvWR{ID: 2, SGL: []uverbs.SGE{b.buf.sge(64, 64)}})
	send := func(id uint64) {
		post(t, a.qp, uverbs.SendWR{ID: id, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.buf.sge(0, 16)}})
	}
	t0 := time.Now()
	send(1)
	c1 := e.passUntil(t, a.cq, 1)[0]
	t1 := time.Now()
	time.Sleep(20 * time.Millisecond)
	t2 := time.Now()
	send(2)
	c2 := e.passUntil(t, a.cq, 1)[0]
	t3 := time.Now()
	r := e.passUntil(t, b.cq, 2)
	for _, c := range []passed{c1, c2, r[0], r[1]} {
		if c.status != uverbs.WCSuccess || c.timestamp == 0 || c.timestamp&^attr.CompletionTimestampMask != 0 {
			t.Errorf("completion %+v: want success and a timestamp within mask %#x", c, attr.CompletionTimestampMask)
		}
	}
	ticks := (c2.timestamp - c1.timestamp) & attr.CompletionTimestampMask
	got := time.Duration(float64(ticks) / float64(attr.HCACoreClock) * 1e6) // kHz: ticks per ms
	lo, hi := t2.Sub(t1), t3.Sub(t0)
	if got < lo-lo/10 || got > hi+hi/10+time.Millisecond {
		t.Errorf("the completions are %v apart by the device clock (%d ticks at %d kHz); the test saw between %v and %v",
			got, ticks, attr.HCACoreClock, lo, hi)
	}
	if r[1].timestamp < r[0].timestamp {
		t.Errorf("receive timestamps go back: %d then %d", r[0].timestamp, r[1].timestamp)
	}
	t.Logf("timestamps %d, %d: %v apart (test saw %v to %v)", c1.timestamp, c2.timestamp, got, lo, hi)
}
