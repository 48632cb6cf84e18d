package conformance

import (
	"bytes"
	"errors"
	"testing"

	"github.com/goverbs/goverbs/uverbs"
)

// testXRC: on a device with XRC, an XRC initiator QP on side a sends
// through an XRC target QP of a domain on side b to the XRC SRQ each send
// names (SEND, SEND_WITH_IMM and an RDMA WRITE checked against the SRQ's
// PD): the data lands in that SRQ's buffers and completes on its CQ,
// reporting the target QP. On a device without XRC (rxe, siw) the XRC
// verbs are refused with ErrNotSupported.
func testXRC(t *testing.T, e *env) {
	for _, s := range []*side{e.a, e.b} {
		a, err := s.ctx.QueryDevice()
		if err != nil {
			t.Fatal(err)
		}
		if a.CapFlags&uverbs.DeviceXRC == 0 {
			xrcRefused(t, s)
			return
		}
	}
	x, err := e.b.ctx.OpenXRCD(uverbs.XRCDOptions{})
	if err != nil {
		t.Fatalf("OpenXRCD: %v", err)
	}
	t.Cleanup(func() { x.Close() })
	rcq, err := e.b.ctx.CreateCQ(16, uverbs.CQOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rcq.Close() })
	srq, err := e.b.pd.CreateSRQEx(uverbs.SRQInitEx{Type: uverbs.SRQTypeXRC, SRQInit: uverbs.SRQInit{MaxWR: 8, MaxSGE: 1}, XRCD: x, CQ: rcq})
	if err != nil {
		t.Fatalf("CreateSRQEx(XRC): %v", err)
	}
	t.Cleanup(func() { srq.Close() })
	tq, err := x.CreateTargetQP()
	if err != nil {
		t.Fatalf("CreateTargetQP: %v", err)
	}
	t.Cleanup(func() { tq.Close() })
	scq, err := e.a.ctx.CreateCQ(16, uverbs.CQOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { scq.Close() })
	iq, err := e.a.pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeXRCIni, SendCQ: scq, Cap: uverbs.QPCap{MaxSendWR: 8, MaxSendSGE: 1}})
	if err != nil {
		t.Fatalf("CreateQP(XRC_INI): %v", err)
	}
	t.Cleanup(func() { iq.Close() })
	o := uverbs.ConnectOptions{Access: uverbs.AccessRemoteWrite, MTU: e.o.MTU, MinRNRTimer: 1}
	if err := iq.Connect(e.endpoint(e.a, iq.QPN()), e.endpoint(e.b, tq.QPN()), o); err != nil {
		t.Fatalf("Connect the initiator: %v", err)
	}
	if err := tq.Connect(e.endpoint(e.b, tq.QPN()), e.endpoint(e.a, iq.QPN()), o); err != nil {
		t.Fatalf("Connect the target: %v", err)
	}
	src, dst := e.a.buffer(t, 8192), e.b.buffer(t, 8192)
	fill(src.bytes(), 0x5a)
	postSRQ(t, srq, uverbs.RecvWR{ID: 0x71, SGL: []uverbs.SGE{dst.sge(0, 1024)}}, uverbs.RecvWR{ID: 0x72, SGL: []uverbs.SGE{dst.sge(1024, 1024)}})
	post(t, iq,
		uverbs.SendWR{ID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, RemoteSRQN: srq.SRQN(), SGL: []uverbs.SGE{src.sge(0, 700)}},
		uverbs.SendWR{ID: 2, Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled, Imm: 0x1234, RemoteSRQN: srq.SRQN(), SGL: []uverbs.SGE{src.sge(1000, 300)}},
		uverbs.SendWR{ID: 3, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, RemoteSRQN: srq.SRQN(), RemoteAddr: dst.addr(4096),
			RKey: dst.mr.RKey(), SGL: []uverbs.SGE{src.sge(2000, 1500)}})
	for i, w := range e.wait(t, scq, 3) {
		op := uverbs.WCSend
		if i == 2 {
			op = uverbs.WCRDMAWrite
		}
		expect(t, w, uint64(i+1), uverbs.WCSuccess, op)
	}
	got := e.wait(t, rcq, 2)
	for i, w := range got {
		if w.Status != uverbs.WCSuccess || w.Opcode != uverbs.WCRecv || w.QPNum != tq.QPN() || w.ID != uint64(0x71+i) {
			t.Errorf("receive %d through the XRC SRQ: %s, want RECV 0x%x on target QP %d", i, fmtWC(w), 0x71+i, tq.QPN())
		}
	}
	if got[0].ByteLen != 700 || got[1].ByteLen != 300 || got[1].Flags&uverbs.WCWithImm == 0 || got[1].Imm != 0x1234 {
		t.Errorf("receive lengths or immediate: %s, %s", fmtWC(got[0]), fmtWC(got[1]))
	}
	d, s := dst.bytes(), src.bytes()
	if !bytes.Equal(d[:700], s[:700]) || !bytes.Equal(d[1024:1324], s[1000:1300]) || !bytes.Equal(d[4096:5596], s[2000:3500]) {
		t.Errorf("the data did not land where the XRC SRQ's receives and the RDMA WRITE put it")
	}
}

// xrcRefused checks that a device without XRC refuses the XRC verbs.
func xrcRefused(t *testing.T, s *side) {
	cq, err := s.ctx.CreateCQ(4, uverbs.CQOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	if _, err := s.pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeXRCIni, SendCQ: cq, Cap: uverbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1}}); !errors.Is(err, uverbs.ErrNotSupported) {
		t.Errorf("CreateQP(XRC_INI) on %s, without XRC: %v, want ErrNotSupported", s.dev.Name, err)
	}
	if _, err := s.pd.CreateSRQEx(uverbs.SRQInitEx{Type: uverbs.SRQTypeXRC, SRQInit: uverbs.SRQInit{MaxWR: 4, MaxSGE: 1}, CQ: cq}); !errors.Is(err, uverbs.ErrNotSupported) {
		t.Errorf("CreateSRQEx(XRC) on %s, without XRC: %v, want ErrNotSupported", s.dev.Name, err)
	}
	if _, err := s.ctx.OpenXRCD(uverbs.XRCDOptions{}); !errors.Is(err, uverbs.ErrNotSupported) {
		t.Errorf("OpenXRCD on %s, without XRC: %v, want ErrNotSupported", s.dev.Name, err)
	}
	t.Logf("%s has no XRC: its XRC verbs are refused with ErrNotSupported", s.dev.Name)
}

func postSRQ(t *testing.T, srq *uverbs.SRQ, wrs ...uverbs.RecvWR) {
	t.Helper()
	if n, err := srq.PostRecv(wrs); n != len(wrs) || err != nil {
		t.Fatalf("SRQ PostRecv = %d, %v", n, err)
	}
}

// testXRCMemoryWindows: on a device with XRC and memory windows, an XRC
// initiator QP (side b's, connected to a target QP of b's domain) binds a
// type 2 window of its PD (BIND_MW posted on the initiator: completion
// BIND_MW) and invalidates it (LOCAL_INV on the initiator, allowed because
// the window is bound to it: completion LOCAL_INV); then b's RC QP binds
// the freed window and a's RDMA WRITE through the new key lands; a bind
// of that window (still bound to b's RC QP) posted on the initiator fails
// with a bind error. Without XRC or without windows the case ends (XRC's
// refusal is the XRC case's).
func testXRCMemoryWindows(t *testing.T, e *env) {
	attr, err := e.b.ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if attr.CapFlags&uverbs.DeviceXRC == 0 || attr.CapFlags&uverbs.DeviceMemWindow == 0 {
		t.Logf("%s has no XRC or no memory windows (capabilities %v): nothing to bind on an XRC initiator", e.b.dev.Name, attr.CapFlags)
		return
	}
	f := e.mwFixture(t, uverbs.MWType2)
	if f == nil {
		t.Fatal("the device reports memory windows but refused AllocMW")
	}
	x, err := e.b.ctx.OpenXRCD(uverbs.XRCDOptions{})
	if err != nil {
		t.Fatalf("OpenXRCD: %v", err)
	}
	t.Cleanup(func() { x.Close() })
	tq, err := x.CreateTargetQP()
	if err != nil {
		t.Fatalf("CreateTargetQP: %v", err)
	}
	t.Cleanup(func() { tq.Close() })
	scq, err := e.b.ctx.CreateCQ(8, uverbs.CQOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { scq.Close() })
	iq, err := e.b.pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeXRCIni, SendCQ: scq, Cap: uverbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1}})
	if err != nil {
		t.Fatalf("CreateQP(XRC_INI): %v", err)
	}
	t.Cleanup(func() { iq.Close() })
	o := uverbs.ConnectOptions{Access: uverbs.AccessRemoteWrite, MTU: e.o.MTU, MinRNRTimer: 1}
	if err := iq.Connect(e.endpoint(e.b, iq.QPN()), e.endpoint(e.b, tq.QPN()), o); err != nil {
		t.Fatalf("Connect the initiator: %v", err)
	}
	if err := tq.Connect(e.endpoint(e.b, tq.QPN()), e.endpoint(e.b, iq.QPN()), o); err != nil {
		t.Fatalf("Connect the target: %v", err)
	}
	k := incRKey(f.rkey)
	b := uverbs.MWBind{MWRKey: f.rkey, NewRKey: k, MRLKey: f.mr.mr.LKey(), Addr: f.mr.addr(mwOff), Length: mwLen,
		Access: uint32(uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead)}
	post(t, iq, uverbs.SendWR{ID: 0x401, Opcode: uverbs.WRBindMW, Flags: uverbs.SendSignaled, Bind: b})
	expect(t, e.wait(t, scq, 1)[0], 0x401, uverbs.WCSuccess, uverbs.WCBindMW)
	post(t, iq, uverbs.SendWR{ID: 0x402, Opcode: uverbs.WRLocalInv, Flags: uverbs.SendSignaled, InvalidateRKey: k})
	expect(t, e.wait(t, scq, 1)[0], 0x402, uverbs.WCSuccess, uverbs.WCLocalInv)
	f.rkey = k
	expect(t, e.bind(t, f, 0x403, mwOff, mwLen, uverbs.AccessRemoteWrite), 0x403, uverbs.WCSuccess, uverbs.WCBindMW)
	fill(f.a.buf.bytes()[:128], 40)
	expect(t, e.access(t, f, 0x404, uverbs.WRRDMAWrite, mwOff+64, 128, f.rkey), 0x404, uverbs.WCSuccess, uverbs.WCRDMAWrite)
	if !bytes.Equal(f.mr.bytes()[mwOff+64:mwOff+192], f.a.buf.bytes()[:128]) {
		t.Errorf("the write through the window, rebound by b's RC QP after the initiator's LOCAL_INV, did not land")
	}
	// Bound to b's RC QP now: the initiator may not bind it again.
	b = uverbs.MWBind{MWRKey: f.rkey, NewRKey: incRKey(f.rkey), MRLKey: f.mr.mr.LKey(), Addr: f.mr.addr(mwOff), Length: mwLen,
		Access: uint32(uverbs.AccessRemoteWrite)}
	post(t, iq, uverbs.SendWR{ID: 0x405, Opcode: uverbs.WRBindMW, Flags: uverbs.SendSignaled, Bind: b})
	expect(t, e.wait(t, scq, 1)[0], 0x405, uverbs.WCMWBindErr, 0)
}
