package mlx5_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// TestXRC: an XRC initiator on one device sends through a target QP of an
// XRC domain on another to two XRC SRQs of that domain, each send naming
// its SRQ; the data lands in the named SRQ's buffers and completes on that
// SRQ's CQ, reporting the target QP. The model decodes the WQE's XRC
// segment from mlx5dv's layout and routes by it (the provider's encoding
// is not what is checked), with CQE version 1 (the SRQ's user index in the
// CQE) and version 0 (its number). A second context of the domain opens
// the target QP by number, and keeps it alive after its creator closed it.
func TestXRC(t *testing.T) {
	for _, v := range []struct {
		name string
		ver  int
		o    model.Options
		pol  uverbs.CommandPolicy
		want uverbs.CommandTransport // how CreateQP and CreateSRQEx reach the kernel
	}{
		{"cqe-v1", 0, model.Options{}, uverbs.PolicyAuto, uverbs.CommandIoctl},
		{"cqe-v0", -1, model.Options{}, uverbs.PolicyAuto, uverbs.CommandIoctl},
		{"write-policy", 0, model.Options{}, uverbs.PolicyWrite, uverbs.CommandWrite},
		{"no-ioctl", 0, model.Options{NoIoctl: true}, uverbs.PolicyAuto, uverbs.CommandWrite},
	} {
		t.Run(v.name, func(t *testing.T) {
			v.o.MaxCQEVersion = v.ver
			testXRC(t, v.o, v.pol, v.want)
		})
	}
}

func testXRC(t *testing.T, o model.Options, pol uverbs.CommandPolicy, want uverbs.CommandTransport) {
	f := model.NewFabric()
	d1, dev1 := newModel(t, f, o)
	d2, dev2 := newModel(t, f, o)
	ini := openNode(t, d1, dev1, uverbs.OpenOptions{Transport: pol})
	tgt := openNode(t, d2, dev2, uverbs.OpenOptions{Transport: pol})

	file, err := os.Create(filepath.Join(t.TempDir(), "xrcd"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	x, err := tgt.ctx.OpenXRCD(uverbs.XRCDOptions{File: file, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	rcq := tgt.cq(64, nil)
	var srqs [2]*uverbs.SRQ
	for i := range srqs {
		s, err := tgt.pd.CreateSRQEx(uverbs.SRQInitEx{Type: uverbs.SRQTypeXRC, SRQInit: uverbs.SRQInit{MaxWR: 8, MaxSGE: 2}, XRCD: x, CQ: rcq})
		if err != nil {
			t.Fatalf("CreateSRQEx(XRC): %v", err)
		}
		defer s.Close()
		if s.Type() != uverbs.SRQTypeXRC || s.SRQN() == 0 {
			t.Fatalf("XRC SRQ: type %v, number %d", s.Type(), s.SRQN())
		}
		srqs[i] = s
	}
	tq, err := x.CreateTargetQP()
	if err != nil {
		t.Fatalf("CreateTargetQP: %v", err)
	}
	if tq.Type() != uverbs.QPTypeXRCTgt || tq.PD() != nil {
		t.Errorf("target QP: type %v, PD %v", tq.Type(), tq.PD())
	}
	scq := ini.cq(64, nil)
	iq, err := ini.pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeXRCIni, SendCQ: scq,
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxSendSGE: 2, MaxInlineData: 64}})
	if err != nil {
		t.Fatalf("CreateQP(XRC_INI): %v", err)
	}
	defer iq.Close()
	connect(t, iq, tq.QPN(), lidTo(d2))
	connect(t, tq, iq.QPN(), lidTo(d1))
	// The XRC objects go by the ioctl methods where the kernel has them
	// (the model answers them as uverbs_std_types_{qp,srq}.c do), by the
	// write commands otherwise (uverbs' transport record says "ioctl" for
	// a write command sent through INVOKE_WRITE too: the model counts the
	// methods themselves).
	n := map[bool]int{true: 1}[want == uverbs.CommandIoctl]
	for _, c := range []struct {
		d      *model.Device
		obj    uint16
		method uint16
		want   int
		what   string
	}{
		{d2, abi.UVERBS_OBJECT_SRQ, abi.UVERBS_METHOD_SRQ_CREATE, 2 * n, "SRQ_CREATE calls for the two XRC SRQs"},
		{d2, abi.UVERBS_OBJECT_QP, abi.UVERBS_METHOD_QP_CREATE, n, "QP_CREATE calls for the target QP"},
		{d1, abi.UVERBS_OBJECT_QP, abi.UVERBS_METHOD_QP_CREATE, n, "QP_CREATE calls for the initiator"},
	} {
		if got := c.d.MethodCalls(c.obj, c.method); got != c.want {
			t.Errorf("%s: %d, want %d (%v)", c.what, got, c.want, want)
		}
	}

	// Receives: SRQ i's buffer at 100000+i*10000 of the target's memory.
	for i, s := range srqs {
		for k := 0; k < 2; k++ {
			off := 100000 + i*10000 + k*4000
			if _, err := s.PostRecv([]uverbs.RecvWR{{ID: uint64(0x100*(i+1) + k), SGL: []uverbs.SGE{tgt.sge(off, 4000)}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	src := ini.buf.Bytes()
	for i := range src[:16384] {
		src[i] = byte(i*7 + 3)
	}
	wrs := []uverbs.SendWR{
		{ID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, RemoteSRQN: srqs[1].SRQN(), SGL: []uverbs.SGE{ini.sge(0, 3000)}},
		{ID: 2, Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled, Imm: 0xfeed, RemoteSRQN: srqs[0].SRQN(), SGL: []uverbs.SGE{ini.sge(5000, 1000)}},
		{ID: 3, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, RemoteSRQN: srqs[0].SRQN(), RemoteAddr: tgt.addr(200000), RKey: tgt.mr.RKey(), SGL: []uverbs.SGE{ini.sge(8000, 2000)}},
		{ID: 4, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | uverbs.SendInline, RemoteSRQN: srqs[1].SRQN(), SGL: []uverbs.SGE{ini.sge(12000, 40)}},
	}
	if _, err := iq.PostSend(wrs); err != nil {
		t.Fatalf("PostSend: %v", err)
	}
	for i, w := range poll(t, scq, len(wrs)) {
		want := uverbs.WCSend
		if wrs[i].Opcode == uverbs.WRRDMAWrite {
			want = uverbs.WCRDMAWrite
		}
		ok(t, w, wrs[i].ID, want)
	}
	got := poll(t, rcq, 3)
	byID := map[uint64]uverbs.WorkCompletion{}
	for _, w := range got {
		byID[w.ID] = w
		if w.Status != uverbs.WCSuccess || w.Opcode != uverbs.WCRecv || w.QPNum != tq.QPN() {
			t.Errorf("receive %+v: want success RECV on target QP %d", w, tq.QPN())
		}
	}
	tb := tgt.buf.Bytes()
	for _, c := range []struct {
		id       uint64
		off, src int
		n        int
		imm      bool
	}{{0x200, 110000, 0, 3000, false}, {0x100, 100000, 5000, 1000, true}, {0x201, 114000, 12000, 40, false}} {
		w, found := byID[c.id]
		if !found {
			t.Errorf("no completion for receive %#x (got %+v)", c.id, got)
			continue
		}
		if int(w.ByteLen) != c.n || (w.Flags&uverbs.WCWithImm != 0) != c.imm || c.imm && w.Imm != 0xfeed {
			t.Errorf("receive %#x: %+v", c.id, w)
		}
		if !bytes.Equal(tb[c.off:c.off+c.n], src[c.src:c.src+c.n]) {
			t.Errorf("receive %#x: the data did not land in its SRQ's buffer", c.id)
		}
	}
	if !bytes.Equal(tb[200000:202000], src[8000:10000]) {
		t.Errorf("RDMA WRITE through the XRC target did not land")
	}

	// The same through the batch builder (ibv_wr_set_xrc_srqn): one SEND
	// to SRQ 0's second receive.
	if err := iq.StartWR().Send(5, uverbs.SendSignaled).SetSGE(ini.mr.LKey(), ini.addr(14000), 500).SetXRCSRQN(srqs[0].SRQN()).Complete(); err != nil {
		t.Fatalf("WRBatch: %v", err)
	}
	ok(t, poll(t, scq, 1)[0], 5, uverbs.WCSend)
	if w := poll(t, rcq, 1)[0]; w.ID != 0x101 || w.ByteLen != 500 || w.QPNum != tq.QPN() || !bytes.Equal(tb[104000:104500], src[14000:14500]) {
		t.Errorf("batched XRC SEND: %+v, or its data did not land in SRQ 0's second buffer", w)
	}

	// The initiator's fast path allocates nothing: 9 RDMA WRITEs through
	// the target posted while the model is paused (its own allocations
	// would count), then completed.
	wr := []uverbs.SendWR{{ID: 6, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, RemoteSRQN: srqs[0].SRQN(),
		RemoteAddr: tgt.addr(300000), RKey: tgt.mr.RKey(), SGL: []uverbs.SGE{ini.sge(0, 64)}}}
	d1.Pause()
	d2.Pause()
	allocs := testing.AllocsPerRun(8, func() {
		if _, err := iq.PostSend(wr); err != nil {
			t.Fatal(err)
		}
	})
	d1.Resume()
	d2.Resume()
	for _, w := range poll(t, scq, 9) {
		ok(t, w, 6, uverbs.WCRDMAWrite)
	}
	if allocs != 0 {
		t.Errorf("XRC PostSend: %v allocations per send, want 0", allocs)
	}

	// Another context of the domain opens the target QP by number.
	other := openNode(t, d2, dev2, uverbs.OpenOptions{Transport: uverbs.PolicyWrite})
	ox, err := other.ctx.OpenXRCD(uverbs.XRCDOptions{File: file})
	if err != nil {
		t.Fatal(err)
	}
	defer ox.Close()
	oq, err := ox.OpenQP(tq.QPN())
	if err != nil {
		t.Fatalf("OpenQP(%d): %v", tq.QPN(), err)
	}
	if oq.QPN() != tq.QPN() || oq.Type() != uverbs.QPTypeXRCTgt {
		t.Errorf("opened QP %d of type %v, want %d XRC_TGT", oq.QPN(), oq.Type(), tq.QPN())
	}
	if _, err := ox.OpenQP(iq.QPN()); err == nil {
		t.Errorf("OpenQP of a QP number that is no target of the domain succeeded")
	}
	if _, err := oq.PostRecv([]uverbs.RecvWR{{ID: 1}}); err == nil {
		t.Errorf("PostRecv on a target QP succeeded")
	}
	if err := tq.Close(); err != nil {
		t.Fatal(err)
	}
	a, _, err := oq.Query(uverbs.QPAttrState)
	if err != nil || a.State != uverbs.QPStateRTS {
		t.Errorf("the opened target after its creator closed it: state %v, %v; want RTS", a.State, err)
	}
	// A send to an SRQ number that is not the domain's fails at the
	// initiator (the target refuses it: remote invalid request).
	if _, err := iq.PostSend([]uverbs.SendWR{{ID: 9, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, RemoteSRQN: 0xabcde, SGL: []uverbs.SGE{ini.sge(0, 10)}}}); err != nil {
		t.Fatal(err)
	}
	if w := poll(t, scq, 1)[0]; w.ID != 9 || w.Status != uverbs.WCRemInvReqErr {
		t.Errorf("send to an unknown SRQ: %+v, want remote invalid request", w)
	}
	if err := oq.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestXRCRefusals: what the XRC verbs refuse before the kernel, and a
// device without XRC refusing them all with ErrNotSupported.
func TestXRCRefusals(t *testing.T) {
	d, dev := newModel(t, nil, model.Options{})
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	cq := n.cq(16, nil)
	if _, err := n.pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeXRCIni, SendCQ: cq, RecvCQ: cq, Cap: uverbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("XRC_INI with a receive CQ: %v, want EINVAL", err)
	}
	x, err := n.ctx.OpenXRCD(uverbs.XRCDOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if _, err := n.pd.CreateSRQEx(uverbs.SRQInitEx{Type: uverbs.SRQTypeXRC, SRQInit: uverbs.SRQInit{MaxWR: 4, MaxSGE: 1}, XRCD: x}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("XRC SRQ without a CQ: %v, want EINVAL", err)
	}
	s, err := n.pd.CreateSRQEx(uverbs.SRQInitEx{Type: uverbs.SRQTypeXRC, SRQInit: uverbs.SRQInit{MaxWR: 4, MaxSGE: 1}, XRCD: x, CQ: cq})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := n.pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, SRQ: s, Cap: uverbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("an RC QP fed by an XRC SRQ: %v, want EINVAL", err)
	}
	if _, err := n.pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeXRCTgt, SendCQ: cq, RecvCQ: cq}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("PD.CreateQP(XRC_TGT): %v, want EINVAL (XRCD.CreateTargetQP)", err)
	}
	iq, err := n.pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeXRCIni, SendCQ: cq, Cap: uverbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer iq.Close()
	connect(t, iq, 0x99, lidTo(d))
	if _, err := iq.PostSend([]uverbs.SendWR{{ID: 1, Opcode: uverbs.WRBindMW, Bind: uverbs.MWBind{MWRKey: 0x100, NewRKey: 0x200, Length: 64}}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("BIND_MW renaming the window's index on an XRC initiator: %v, want EINVAL", err)
	}
	if _, err := iq.PostSend([]uverbs.SendWR{{ID: 1, Opcode: uverbs.WRLocalInv, InvalidateRKey: 5, SGL: []uverbs.SGE{n.sge(0, 8)}}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("LOCAL_INV with an SGL on an XRC initiator: %v, want EINVAL", err)
	}

	nd, ndev := newModel(t, nil, model.Options{NoXRC: true})
	nn := openNode(t, nd, ndev, uverbs.OpenOptions{})
	ncq := nn.cq(16, nil)
	if _, err := nn.pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeXRCIni, SendCQ: ncq, Cap: uverbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1}}); !errors.Is(err, uverbs.ErrNotSupported) {
		t.Errorf("XRC_INI on a device without XRC: %v, want ErrNotSupported", err)
	}
	if _, err := nn.pd.CreateSRQEx(uverbs.SRQInitEx{Type: uverbs.SRQTypeXRC, SRQInit: uverbs.SRQInit{MaxWR: 4, MaxSGE: 1}}); !errors.Is(err, uverbs.ErrNotSupported) {
		t.Errorf("XRC SRQ on a device without XRC: %v, want ErrNotSupported", err)
	}
	b, err := nn.pd.CreateSRQEx(uverbs.SRQInitEx{SRQInit: uverbs.SRQInit{MaxWR: 4, MaxSGE: 1}})
	if err != nil || b.Type() != uverbs.SRQTypeBasic {
		t.Fatalf("CreateSRQEx(basic): %v", err)
	}
	b.Close()
}

// TestXRCMemoryWindows: BIND_MW and LOCAL_INV posted on an XRC initiator
// QP, as rdma-core's mlx5 provider posts them on an IBV_QPT_XRC_SEND QP: a
// UMR WQE right after the control segment, with no XRC segment (the
// model decodes the UMR at that place, so an XRC segment in between would
// be a violation). The initiator binds in its PD like any QP: a type 2
// window is bound to the initiator (and only it may invalidate it), a type
// 1 window it binds serves a remote RDMA WRITE arriving at an RC QP of the
// same PD. Both the list API and the batch builder post them.
func TestXRCMemoryWindows(t *testing.T) {
	const mwAcc = uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead
	p := newMWPair(t, allAccess|uverbs.AccessMWBind)
	x, err := p.n.ctx.OpenXRCD(uverbs.XRCDOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	tq, err := x.CreateTargetQP()
	if err != nil {
		t.Fatal(err)
	}
	defer tq.Close()
	icq := p.n.cq(16, nil)
	iq, err := p.n.pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeXRCIni, SendCQ: icq, Cap: uverbs.QPCap{MaxSendWR: 8, MaxSendSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer iq.Close()
	connect(t, iq, tq.QPN(), lidTo(p.d))
	connect(t, tq, iq.QPN(), lidTo(p.d))

	// A type 1 window bound by the initiator; b's peer a writes through it.
	mw1 := p.alloc(t, uverbs.MWType1)
	w := p.bind(t, iq, icq, mw1.RKey(), 4096, 4096, mwAcc)
	status(t, "type 1 bind on the XRC initiator", w, uverbs.WCSuccess)
	if w.Opcode != uverbs.WCBindMW || w.ID != 0xb1 {
		t.Errorf("bind completion %+v, want BIND_MW of WR 0xb1", w)
	}
	k1 := uverbs.IncRKey(mw1.RKey())
	// The initiator's UMR path allocates nothing: five rebinds (to the
	// same key) posted while the model is paused, then completed.
	rebind := []uverbs.SendWR{{ID: 0xb4, Opcode: uverbs.WRBindMW, Flags: uverbs.SendSignaled, Bind: uverbs.MWBind{MWRKey: k1, NewRKey: k1,
		MRLKey: p.mr.LKey(), Addr: p.addr(4096), Length: 4096, Access: uint32(mwAcc)}}}
	p.d.Pause()
	allocs := testing.AllocsPerRun(4, func() {
		if _, err := iq.PostSend(rebind); err != nil {
			t.Fatal(err)
		}
	})
	p.d.Resume()
	for _, w := range poll(t, icq, 5) {
		ok(t, w, 0xb4, uverbs.WCBindMW)
	}
	if allocs != 0 {
		t.Errorf("BIND_MW on the XRC initiator: %v allocations per post, want 0", allocs)
	}
	src := p.n.buf.Bytes()
	for i := range src[:256] {
		src[i] = byte(i ^ 0x5a)
	}
	status(t, "RDMA WRITE through the initiator's type 1 window", p.write(t, k1, 4096+512, 256), uverbs.WCSuccess)
	if !bytes.Equal(p.win.Bytes()[4096+512:4096+768], src[:256]) {
		t.Errorf("the write through the window did not land")
	}
	status(t, "RDMA WRITE past the window", p.write(t, k1, 8192, 64), uverbs.WCRemAccessErr)
	reconnect(t, p) // the error moved the pair to ERR

	// A type 2 window bound to the initiator, then invalidated by it
	// through the batch builder (ibv_wr_local_inv).
	mw2 := p.alloc(t, uverbs.MWType2)
	status(t, "type 2 bind on the XRC initiator", p.bind(t, iq, icq, mw2.RKey(), 0, 4096, mwAcc), uverbs.WCSuccess)
	k2 := uverbs.IncRKey(mw2.RKey())
	status(t, "RDMA WRITE at b through a type 2 window bound to the initiator", p.write(t, k2, 0, 64), uverbs.WCRemAccessErr)
	reconnect(t, p)
	if err := iq.StartWR().LocalInv(0xc1, uverbs.SendSignaled, k2).Complete(); err != nil {
		t.Fatalf("WRBatch LocalInv on the XRC initiator: %v", err)
	}
	w = poll(t, icq, 1)[0]
	status(t, "LOCAL_INV on the XRC initiator", w, uverbs.WCSuccess)
	if w.Opcode != uverbs.WCLocalInv || w.ID != 0xc1 {
		t.Errorf("invalidation completion %+v, want LOCAL_INV of WR 0xc1", w)
	}
	// Free again: b binds it (the batch builder's BindMW) and the write
	// through b's binding lands.
	k3 := uverbs.IncRKey(k2)
	if err := p.b.StartWR().BindMW(0xb2, uverbs.SendSignaled, uverbs.MWBind{MWRKey: k2, NewRKey: k3, MRLKey: p.mr.LKey(),
		Addr: p.addr(0), Length: 4096, Access: uint32(mwAcc)}).Complete(); err != nil {
		t.Fatal(err)
	}
	status(t, "b's bind of the invalidated window", poll(t, p.cb, 1)[0], uverbs.WCSuccess)
	status(t, "RDMA WRITE through b's binding", p.write(t, k3, 0, 64), uverbs.WCSuccess)

	// The initiator may not invalidate a window bound to b; the batch
	// builder's BindMW on the initiator, then the failing LOCAL_INV.
	if err := iq.StartWR().BindMW(0xb3, uverbs.SendSignaled, uverbs.MWBind{MWRKey: k1, NewRKey: uverbs.IncRKey(k1), MRLKey: p.mr.LKey(),
		Addr: p.addr(4096), Length: 4096, Access: uint32(mwAcc)}).Complete(); err != nil {
		t.Fatal(err)
	}
	status(t, "rebinding the type 1 window through the batch builder", poll(t, icq, 1)[0], uverbs.WCSuccess)
	if _, err := iq.PostSend([]uverbs.SendWR{{ID: 0xc2, Opcode: uverbs.WRLocalInv, Flags: uverbs.SendSignaled, InvalidateRKey: k3}}); err != nil {
		t.Fatal(err)
	}
	status(t, "LOCAL_INV on the initiator of a window bound to b", poll(t, icq, 1)[0], uverbs.WCMWBindErr)
	status(t, "the window stays b's: a write through it", p.write(t, k3, 64, 64), uverbs.WCSuccess)
}

// reconnect takes the pair's QPs through RESET back to RTS.
func reconnect(t *testing.T, p *mwPair) {
	t.Helper()
	for _, q := range []*uverbs.QP{p.a, p.b} {
		if err := q.Modify(&uverbs.QPAttr{State: uverbs.QPStateReset}, uverbs.QPAttrState); err != nil {
			t.Fatal(err)
		}
	}
	connect(t, p.a, p.b.QPN(), lidTo(p.d))
	connect(t, p.b, p.a.QPN(), lidTo(p.d))
}
