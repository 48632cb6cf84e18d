package mlx5_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// newModel models one device (on f, or a fabric of its own) and returns it
// with the uverbs.Device that opens it. At cleanup it fails the test if the
// model saw anything real hardware would not accept.
func newModel(t testing.TB, f *model.Fabric, o model.Options) (*model.Device, uverbs.Device) {
	t.Helper()
	if f == nil {
		f = model.NewFabric()
	}
	d, err := f.Add(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if v := d.Violations(); len(v) > 0 {
			t.Errorf("the device model saw protocol violations:\n%v", v)
		}
		d.Close()
	})
	return d, uverbs.Device{Name: d.Name(), Driver: uverbs.DriverMLX5, CharDev: d.CharDev(), NodeGUID: d.GUID()}
}

// node is one opened model device with a PD and a registered buffer.
type node struct {
	t   testing.TB
	d   *model.Device
	ctx *uverbs.Context
	pd  *uverbs.PD
	buf *mmap.Region
	mr  *uverbs.MR
}

const allAccess = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic

func openNode(t testing.TB, d *model.Device, dev uverbs.Device, o uverbs.OpenOptions) *node {
	t.Helper()
	ctx, err := uverbs.OpenWith(dev, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { ctx.Close() })
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pd.Close() })
	buf, err := mmap.Anonymous(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buf.Close() })
	mr, err := pd.RegMR(buf.Bytes(), allAccess)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mr.Close() })
	return &node{t: t, d: d, ctx: ctx, pd: pd, buf: buf, mr: mr}
}

func (n *node) sge(off, length int) uverbs.SGE {
	return uverbs.SGE{Addr: uint64(n.buf.Addr()) + uint64(off), Length: uint32(length), LKey: n.mr.LKey()}
}

func (n *node) addr(off int) uint64 { return uint64(n.buf.Addr()) + uint64(off) }

func (n *node) cq(cqe int, ch *uverbs.CompChannel) *uverbs.CQ {
	n.t.Helper()
	cq, err := n.ctx.CreateCQ(cqe, uverbs.CQOptions{Channel: ch})
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { cq.Close() })
	return cq
}

func (n *node) qp(typ uverbs.QPType, cq *uverbs.CQ, c uverbs.QPCap) *uverbs.QP {
	n.t.Helper()
	qp, err := n.pd.CreateQP(uverbs.QPInit{Type: typ, SendCQ: cq, RecvCQ: cq, Cap: c})
	if err != nil {
		n.t.Fatalf("CreateQP: %v", err)
	}
	n.t.Cleanup(func() { qp.Close() })
	return qp
}

// connect takes an RC or UC QP to RTS, addressed by av (uverbs.QP.Connect
// with the endpoints av stands for).
func connect(t testing.TB, q *uverbs.QP, remote uint32, av uverbs.AHAttr) {
	t.Helper()
	local, peer := uverbs.Endpoint{QPN: q.QPN(), Port: 1}, uverbs.Endpoint{QPN: remote, LID: av.DLID}
	o := uverbs.ConnectOptions{Access: allAccess &^ uverbs.AccessLocalWrite, MTU: uverbs.MTU4096, SL: av.SL,
		MaxDestRDAtomic: 4, MinRNRTimer: 1, MaxRDAtomic: 4}
	if g := av.GRH; g != nil {
		local.GIDIndex, peer.GID, o.HopLimit = int(g.SGIDIndex), g.DGID, g.HopLimit
	}
	if q.Type() == uverbs.QPTypeUC {
		o.Access = uverbs.AccessRemoteWrite
	}
	if err := q.Connect(local, peer, o); err != nil {
		t.Fatalf("Connect QP %d: %v", q.QPN(), err)
	}
}

func connectUD(t testing.TB, q *uverbs.QP, qkey uint32) {
	t.Helper()
	if err := q.Connect(uverbs.Endpoint{QPN: q.QPN(), Port: 1}, uverbs.Endpoint{}, uverbs.ConnectOptions{QKey: qkey}); err != nil {
		t.Fatalf("Connect UD QP %d: %v", q.QPN(), err)
	}
}

func grhTo(d *model.Device) uverbs.AHAttr {
	return uverbs.AHAttr{PortNum: 1, GRH: &uverbs.GlobalRoute{DGID: d.GID(1), SGIDIndex: 1, HopLimit: 64}}
}

func lidTo(d *model.Device) uverbs.AHAttr { return uverbs.AHAttr{PortNum: 1, DLID: d.LID(), SL: 2} }

// poll waits for n completions.
func poll(t testing.TB, cq *uverbs.CQ, n int) []uverbs.WorkCompletion {
	t.Helper()
	got := make([]uverbs.WorkCompletion, n)
	k := 0
	deadline := time.Now().Add(10 * time.Second)
	for k < n {
		m, err := cq.Poll(got[k:])
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		k += m
		if m == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d completions: %+v", k, n, got[:k])
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
	return got
}

func ok(t testing.TB, w uverbs.WorkCompletion, id uint64, op uverbs.WCOpcode) {
	t.Helper()
	if w.ID != id || w.Status != uverbs.WCSuccess || w.Opcode != op {
		t.Errorf("completion %+v, want id %#x %v success", w, id, op)
	}
}

var cap1 = uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}

// TestContextNegotiation opens contexts against kernels of several ages:
// the ucontext request is retried without DEVX and with the shorter
// lengths, the UARs come from the UAR object or are the static ones, and the
// CQE version follows; each context then carries a SEND end to end.
func TestContextNegotiation(t *testing.T) {
	for _, c := range []struct {
		name string
		o    model.Options
		open uverbs.OpenOptions
		want model.ContextInfo
	}{
		{"current", model.Options{}, uverbs.OpenOptions{},
			model.ContextInfo{RequestLen: 32, DEVX: true, CQEVersion: 1, DynamicUAR: true}},
		{"no-devx", model.Options{RejectDEVX: true}, uverbs.OpenOptions{},
			model.ContextInfo{RequestLen: 32, CQEVersion: 1, DynamicUAR: true}},
		{"no-uar-object", model.Options{NoDynamicUAR: true}, uverbs.OpenOptions{},
			model.ContextInfo{RequestLen: 32, DEVX: true, CQEVersion: 1, StaticUARs: 8}},
		{"no-lib-caps", model.Options{RejectDEVX: true, KnownReqLen: 24, NoDynamicUAR: true}, uverbs.OpenOptions{},
			model.ContextInfo{RequestLen: 24, CQEVersion: 1, StaticUARs: 8}},
		{"no-cqe-version", model.Options{RejectDEVX: true, KnownReqLen: 16, NoDynamicUAR: true}, uverbs.OpenOptions{},
			model.ContextInfo{RequestLen: 16, CQEVersion: 0, StaticUARs: 8}},
		{"cqe-version-0-device", model.Options{MaxCQEVersion: -1}, uverbs.OpenOptions{},
			model.ContextInfo{RequestLen: 32, DEVX: true, CQEVersion: 0, DynamicUAR: true}},
		{"write-policy", model.Options{}, uverbs.OpenOptions{Transport: uverbs.PolicyWrite},
			model.ContextInfo{RequestLen: 32, DEVX: true, CQEVersion: 1, StaticUARs: 8}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, dev := newModel(t, nil, c.o)
			n := openNode(t, d, dev, c.open)
			cq := n.cq(32, nil)
			a, b := n.qp(uverbs.QPTypeRC, cq, cap1), n.qp(uverbs.QPTypeRC, cq, cap1)
			ci := d.Contexts()
			if len(ci) != 1 {
				t.Fatalf("%d contexts", len(ci))
			}
			got := ci[0]
			got.QPs, got.CQs, got.DynamicUARs = 0, 0, 0
			if got != c.want {
				t.Errorf("negotiated %+v, want %+v", got, c.want)
			}
			connect(t, a, b.QPN(), grhTo(d))
			connect(t, b, a.QPN(), grhTo(d))
			copy(n.buf.Bytes(), "negotiated")
			if _, err := b.PostRecv([]uverbs.RecvWR{{ID: 2, SGL: []uverbs.SGE{n.sge(4096, 64)}}}); err != nil {
				t.Fatal(err)
			}
			if _, err := a.PostSend([]uverbs.SendWR{{ID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{n.sge(0, 10)}}}); err != nil {
				t.Fatal(err)
			}
			ws := poll(t, cq, 2)
			if ws[0].ID+ws[1].ID != 3 || !bytes.Equal(n.buf.Bytes()[4096:4106], []byte("negotiated")) {
				t.Errorf("completions %+v", ws)
			}
		})
	}
	t.Run("nc-uars-only", func(t *testing.T) {
		// A device without BlueFlame: the BF UAR allocation fails, the
		// provider takes a non-cached one and rings 8-byte doorbells.
		d, dev := newModel(t, nil, model.Options{NoBlueFlame: true})
		n := openNode(t, d, dev, uverbs.OpenOptions{})
		cq := n.cq(32, nil)
		a, b := n.qp(uverbs.QPTypeRC, cq, cap1), n.qp(uverbs.QPTypeRC, cq, cap1)
		connect(t, a, b.QPN(), grhTo(d))
		connect(t, b, a.QPN(), grhTo(d))
		if _, err := a.PostSend([]uverbs.SendWR{{ID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			RemoteAddr: n.addr(8192), RKey: n.mr.RKey(), SGL: []uverbs.SGE{n.sge(0, 8)}}}); err != nil {
			t.Fatal(err)
		}
		poll(t, cq, 1)
		if s := d.Stats(); s.Doorbells != 1 || s.BlueFlames != 0 {
			t.Errorf("model stats %+v: want one 8-byte doorbell", s)
		}
	})
}

// TestDynamicUARPages checks that QPs get dedicated BlueFlame registers,
// two per dynamically allocated UAR page, and give them back.
func TestDynamicUARPages(t *testing.T) {
	d, dev := newModel(t, nil, model.Options{})
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	cq := n.cq(64, nil)
	var qps []*uverbs.QP
	for i := 0; i < 5; i++ {
		qps = append(qps, n.qp(uverbs.QPTypeRC, cq, cap1))
	}
	// One page at open (CQ arm doorbells, and 2 bfregs), then one per 2 QPs.
	if got := d.Contexts()[0].DynamicUARs; got != 3 {
		t.Errorf("%d UAR pages for 5 QPs, want 3", got)
	}
	for _, q := range qps[:2] {
		q.Close()
	}
	n.qp(uverbs.QPTypeRC, cq, cap1)
	n.qp(uverbs.QPTypeRC, cq, cap1)
	if got := d.Contexts()[0].DynamicUARs; got != 3 {
		t.Errorf("%d UAR pages after closing 2 QPs and creating 2, want 3 (bfregs reused)", got)
	}
	if s := d.Stats(); s.UARMappings != 3 {
		t.Errorf("%d UAR mappings, want 3", s.UARMappings)
	}
	n.ctx.Close()
	if s := d.Stats(); s.UARMappings != 0 || s.Contexts != 0 {
		t.Errorf("after Close: %d UAR mappings, %d contexts", s.UARMappings, s.Contexts)
	}
}

// TestCrossDevice runs RC, UC and UD traffic between two modelled devices
// on one fabric, addressed by GID and by LID.
func TestCrossDevice(t *testing.T) {
	f := model.NewFabric()
	d1, dev1 := newModel(t, f, model.Options{})
	d2, dev2 := newModel(t, f, model.Options{NoDynamicUAR: true})
	n1 := openNode(t, d1, dev1, uverbs.OpenOptions{})
	n2 := openNode(t, d2, dev2, uverbs.OpenOptions{})
	for _, route := range []string{"gid", "lid"} {
		t.Run("RC-"+route, func(t *testing.T) {
			cq1, cq2 := n1.cq(64, nil), n2.cq(64, nil)
			a, b := n1.qp(uverbs.QPTypeRC, cq1, cap1), n2.qp(uverbs.QPTypeRC, cq2, cap1)
			av1, av2 := grhTo(d2), grhTo(d1)
			if route == "lid" {
				av1, av2 = lidTo(d2), lidTo(d1)
			}
			connect(t, a, b.QPN(), av1)
			connect(t, b, a.QPN(), av2)
			src := n1.buf.Bytes()
			for i := range src[:8192] {
				src[i] = byte(i * 13)
			}
			binary.NativeEndian.PutUint64(n2.buf.Bytes()[65536:], 40)
			if _, err := b.PostRecv([]uverbs.RecvWR{{ID: 0xB1, SGL: []uverbs.SGE{n2.sge(0, 1000), n2.sge(10000, 5000)}}}); err != nil {
				t.Fatal(err)
			}
			wrs := []uverbs.SendWR{
				{ID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | uverbs.SendSolicited, SGL: []uverbs.SGE{n1.sge(0, 3000)}},
				{ID: 2, Opcode: uverbs.WRRDMAWrite, RemoteAddr: n2.addr(20000), RKey: n2.mr.RKey(), SGL: []uverbs.SGE{n1.sge(100, 4000)}},
				{ID: 3, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled, RemoteAddr: n2.addr(20000), RKey: n2.mr.RKey(), SGL: []uverbs.SGE{n1.sge(30000, 4000)}},
				{ID: 4, Opcode: uverbs.WRAtomicFetchAndAdd, Flags: uverbs.SendSignaled, RemoteAddr: n2.addr(65536), RKey: n2.mr.RKey(), CompareAdd: 2, SGL: []uverbs.SGE{n1.sge(40000, 8)}},
				{ID: 5, Opcode: uverbs.WRAtomicCmpAndSwp, Flags: uverbs.SendSignaled, RemoteAddr: n2.addr(65536), RKey: n2.mr.RKey(), CompareAdd: 42, Swap: 7, SGL: []uverbs.SGE{n1.sge(40008, 8)}},
			}
			if _, err := a.PostSend(wrs); err != nil {
				t.Fatal(err)
			}
			ws := poll(t, cq1, 4)
			ok(t, ws[0], 1, uverbs.WCSend)
			ok(t, ws[1], 3, uverbs.WCRDMARead)
			ok(t, ws[2], 4, uverbs.WCFetchAdd)
			ok(t, ws[3], 5, uverbs.WCCompSwap)
			rw := poll(t, cq2, 1)[0]
			ok(t, rw, 0xB1, uverbs.WCRecv)
			if rw.ByteLen != 3000 || rw.SrcQP != a.QPN() {
				t.Errorf("receive %+v", rw)
			}
			dst := n2.buf.Bytes()
			if !bytes.Equal(dst[:1000], src[:1000]) || !bytes.Equal(dst[10000:12000], src[1000:3000]) {
				t.Errorf("SEND scattered wrong")
			}
			if !bytes.Equal(dst[20000:24000], src[100:4100]) || !bytes.Equal(src[30000:34000], src[100:4100]) {
				t.Errorf("WRITE then READ: bytes differ")
			}
			if got := binary.NativeEndian.Uint64(dst[65536:]); got != 7 {
				t.Errorf("after FA(+2) and CAS(42→7) on 40: %d", got)
			}
			if a1, a2 := binary.NativeEndian.Uint64(src[40000:]), binary.NativeEndian.Uint64(src[40008:]); a1 != 40 || a2 != 42 {
				t.Errorf("atomics returned %d and %d, want 40 and 42", a1, a2)
			}
		})
	}
	t.Run("UD-lid", func(t *testing.T) {
		cq1, cq2 := n1.cq(64, nil), n2.cq(64, nil)
		udCap := uverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}
		a, b := n1.qp(uverbs.QPTypeUD, cq1, udCap), n2.qp(uverbs.QPTypeUD, cq2, udCap)
		connectUD(t, a, 0x1234)
		connectUD(t, b, 0x1234)
		ah, err := n1.pd.CreateAH(lidTo(d2))
		if err != nil {
			t.Fatal(err)
		}
		defer ah.Close()
		copy(n1.buf.Bytes(), "datagram")
		if _, err := b.PostRecv([]uverbs.RecvWR{{ID: 9, SGL: []uverbs.SGE{n2.sge(0, 40+64)}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.PostSend([]uverbs.SendWR{{ID: 8, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{n1.sge(0, 8)},
			UD: uverbs.UDDest{AH: ah, RemoteQPN: b.QPN(), QKey: 0x1234}}}); err != nil {
			t.Fatal(err)
		}
		ok(t, poll(t, cq1, 1)[0], 8, uverbs.WCSend)
		rw := poll(t, cq2, 1)[0]
		ok(t, rw, 9, uverbs.WCRecv)
		if rw.ByteLen != 8 || rw.Flags&uverbs.WCWithGRH != 0 || rw.SrcQP != a.QPN() || rw.SLID != d1.LID() || rw.SL != 2 {
			t.Errorf("LID-routed UD receive %+v", rw)
		}
		if got := string(n2.buf.Bytes()[40:48]); got != "datagram" {
			t.Errorf("payload %q at offset 40", got)
		}
	})
}

// TestSendQueueWrap posts WQEs of 1, 2 and 3 WQEBBs through a small send
// queue many times over, in lists and alone, so WQEs (and BlueFlame copies)
// wrap around the ring's end.
func TestSendQueueWrap(t *testing.T) {
	d, dev := newModel(t, nil, model.Options{})
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	cq := n.cq(256, nil)
	c := uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 4, MaxRecvSGE: 1, MaxInlineData: 120}
	a, b := n.qp(uverbs.QPTypeRC, cq, c), n.qp(uverbs.QPTypeRC, cq, c)
	connect(t, a, b.QPN(), grhTo(d))
	connect(t, b, a.QPN(), grhTo(d))
	buf := n.buf.Bytes()
	for round := 0; round < 200; round++ {
		k := 1 + round%3
		wrs := make([]uverbs.SendWR, k)
		for i := range wrs {
			off := 8192 * (i + 1)
			for j := 0; j < 120; j++ {
				buf[j+off-4096] = byte(round + i + j)
			}
			switch (round + i) % 3 {
			case 0: // ctrl + raddr + data: 1 WQEBB
				wrs[i] = uverbs.SendWR{Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{n.sge(off-4096, 120)}}
			case 1: // ctrl + raddr + 4 data: 2 WQEBBs
				wrs[i] = uverbs.SendWR{Opcode: uverbs.WRRDMAWrite,
					SGL: []uverbs.SGE{n.sge(off-4096, 30), n.sge(off-4096+30, 30), n.sge(off-4096+60, 30), n.sge(off-4096+90, 30)}}
			case 2: // ctrl + raddr + 120 bytes inline: 3 WQEBBs
				wrs[i] = uverbs.SendWR{Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendInline, SGL: []uverbs.SGE{n.sge(off-4096, 120)}}
			}
			wrs[i].ID, wrs[i].Flags = uint64(round*10+i), wrs[i].Flags|uverbs.SendSignaled
			wrs[i].RemoteAddr, wrs[i].RKey = n.addr(500000+off), n.mr.RKey()
		}
		if m, err := a.PostSend(wrs); err != nil {
			if errors.Is(err, unix.ENOMEM) {
				t.Fatalf("round %d: send queue full with nothing outstanding: %v", round, err)
			}
			t.Fatalf("round %d: PostSend = %d, %v", round, m, err)
		}
		for i, w := range poll(t, cq, k) {
			ok(t, w, uint64(round*10+i), uverbs.WCRDMAWrite)
			off := 8192 * (i + 1)
			if !bytes.Equal(buf[500000+off:500000+off+120], buf[off-4096:off-4096+120]) {
				t.Fatalf("round %d WR %d: remote bytes differ", round, i)
			}
		}
	}
	if s := d.Stats(); s.BlueFlames == 0 || s.Doorbells < 200 {
		t.Errorf("model stats %+v: want a doorbell per PostSend and BlueFlame copies", s)
	}
}

// TestArmWithoutSyscall: arming a CQ is a doorbell (record + UAR), not a
// command; an event arrives for the next completion, and an arm with an old
// sequence number (no event consumed since the last one) is ignored by the
// device.
func TestArmWithoutSyscall(t *testing.T) {
	r := newChannelPair(t, uverbs.CQOptions{})
	n, cq := r.n, r.cq
	before := n.ctx.Syscalls()
	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	if d := n.ctx.Syscalls() - before; d != 0 {
		t.Errorf("ReqNotify made %d syscalls", d)
	}
	if _, err := r.a.PostSend([]uverbs.SendWR{{ID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		RemoteAddr: n.addr(8192), RKey: n.mr.RKey(), SGL: []uverbs.SGE{n.sge(0, 8)}}}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := contextWithTimeout(5 * time.Second)
	defer cancel()
	got, err := r.ch.Wait(wctx)
	if err != nil || got != cq {
		t.Fatalf("Wait: %v, %v", got, err)
	}
	poll(t, cq, 1)
	s := r.d.Stats()
	if s.Arms != 1 || s.Events != 1 || s.StaleArms != 0 {
		t.Errorf("model saw %+v", s)
	}
}

// TestResetReuse takes a QP with stuck sends to ERR (everything flushed),
// then to RESET and back to RTS: the rings start over and work.
func TestResetReuse(t *testing.T) {
	d, dev := newModel(t, nil, model.Options{})
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	cq := n.cq(64, nil)
	a, b := n.qp(uverbs.QPTypeRC, cq, cap1), n.qp(uverbs.QPTypeRC, cq, cap1)
	connect(t, a, b.QPN(), grhTo(d))
	connect(t, b, a.QPN(), grhTo(d))
	send := func(ids ...uint64) {
		t.Helper()
		wrs := make([]uverbs.SendWR, len(ids))
		for i, id := range ids {
			wrs[i] = uverbs.SendWR{ID: id, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{n.sge(0, 8)}}
		}
		if _, err := a.PostSend(wrs); err != nil {
			t.Fatal(err)
		}
	}
	send(1, 2, 3) // b has no receives: RNR, retried forever
	time.Sleep(5 * time.Millisecond)
	if err := a.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	for i, w := range poll(t, cq, 3) {
		if w.ID != uint64(i+1) || w.Status != uverbs.WCWRFlushErr {
			t.Errorf("flush %d: %+v", i, w)
		}
	}
	if err := a.Modify(&uverbs.QPAttr{State: uverbs.QPStateReset}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	connect(t, a, b.QPN(), grhTo(d))
	if _, err := b.PostRecv([]uverbs.RecvWR{{ID: 10, SGL: []uverbs.SGE{n.sge(4096, 64)}}, {ID: 11, SGL: []uverbs.SGE{n.sge(8192, 64)}}}); err != nil {
		t.Fatal(err)
	}
	send(4, 5)
	got := map[uint64]bool{}
	for _, w := range poll(t, cq, 4) {
		if w.Status != uverbs.WCSuccess {
			t.Errorf("after reset: %+v", w)
		}
		got[w.ID] = true
	}
	for _, id := range []uint64{4, 5, 10, 11} {
		if !got[id] {
			t.Errorf("no completion for %d after the reset: %v", id, got)
		}
	}
}

// TestResizeCQ grows and shrinks a CQ that has wrapped several times, with
// completions waiting in it, for both CQE sizes: nothing is lost or
// repeated, and the new ring's owner bits are right on every later pass.
func TestResizeCQ(t *testing.T) {
	for _, size := range []string{"64", "128"} {
		t.Run(size, func(t *testing.T) {
			t.Setenv("MLX5_CQE_SIZE", size)
			d, dev := newModel(t, nil, model.Options{})
			n := openNode(t, d, dev, uverbs.OpenOptions{})
			cq := n.cq(3, nil) // 4 entries
			a := n.qp(uverbs.QPTypeRC, cq, uverbs.QPCap{MaxSendWR: 64, MaxSendSGE: 1})
			connect(t, a, a.QPN(), grhTo(d)) // loopback to itself: WRITEs need no receives
			next := uint64(0)
			write := func(k int) {
				t.Helper()
				wrs := make([]uverbs.SendWR, k)
				for i := range wrs {
					next++
					wrs[i] = uverbs.SendWR{ID: next, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
						RemoteAddr: n.addr(65536), RKey: n.mr.RKey(), SGL: []uverbs.SGE{n.sge(0, 8)}}
				}
				if _, err := a.PostSend(wrs); err != nil {
					t.Fatal(err)
				}
			}
			polled := uint64(0)
			expectIDs := func(k int) {
				t.Helper()
				for _, w := range poll(t, cq, k) {
					polled++
					if w.ID != polled || w.Status != uverbs.WCSuccess {
						t.Fatalf("completion %+v, want id %d", w, polled)
					}
				}
			}
			waitCQEs := func(total int) {
				for d.Stats().CQEs < total {
					time.Sleep(100 * time.Microsecond)
				}
			}
			for round := 0; round < 5; round++ { // wrap the 4-entry ring a few times
				write(3)
				expectIDs(3)
			}
			write(3)
			waitCQEs(18)
			expectIDs(1) // two wait in the old ring
			for _, c := range []int{100, 7, 1000, 7} {
				if err := cq.Resize(c); err != nil {
					t.Fatalf("Resize(%d): %v", c, err)
				}
				if cq.CQE() < c {
					t.Fatalf("Resize(%d): CQE %d", c, cq.CQE())
				}
				expectIDs(int(next - polled)) // the moved ones
				for round := 0; round < 6; round++ {
					write(5)
					expectIDs(5)
				}
				before := d.Stats().CQEs
				write(3)
				waitCQEs(before + 3)
				expectIDs(1)
			}
			expectIDs(int(next - polled))
		})
	}
}
