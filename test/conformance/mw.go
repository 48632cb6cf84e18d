package conformance

import (
	"bytes"
	"errors"
	"testing"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/uverbs"
)

// Memory windows. The window lives on the receiving side (b): its PD, its
// MR, and for a type 2 window its QP, which binds the window with a
// BIND_MW work request and to which the window is then tied (IBTA C10-72;
// only requests arriving on that QP may use it). The sending side (a)
// reaches b's memory through the window's rkey.

// Window geometry inside the 64 KiB MR: [mwOff, mwOff+mwLen).
const (
	mwMRSize = 64 << 10
	mwOff    = 8192
	mwLen    = 4096
)

// incRKey is the next key of a window: the same index, the low (key) byte
// plus one, as libibverbs' ibv_inc_rkey.
func incRKey(k uint32) uint32 { return k&^0xff | (k+1)&0xff }

// mwFixture is a connected RC pair, an MR on b that windows may be bound
// to, and a window of b's PD; nil if the device has no memory windows and
// refused the window as it should (the caller's test ends there).
type mwFixture struct {
	a, b *end
	mr   *buffer // b's MR, registered with MW_BIND access
	mw   *uverbs.MW
	rkey uint32 // the window's current key
}

// iwarpNoMW checks that an iWARP device (siw) allocates no memory window
// and reports whether it is one.
func (e *env) iwarpNoMW(t *testing.T, typ uverbs.MWType) bool {
	t.Helper()
	if !e.o.IWARP {
		return false
	}
	mw, err := e.b.pd.AllocMW(typ)
	if err == nil {
		mw.Close()
		t.Fatalf("AllocMW(type %d) succeeded on siw", typ)
	}
	t.Logf("AllocMW(type %d) refused: %v", typ, err)
	return true
}

func (e *env) mwFixture(t *testing.T, typ uverbs.MWType) *mwFixture {
	t.Helper()
	a, b := e.pair(t, qpConfig{})
	r, err := mmap.Anonymous(mwMRSize)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := e.b.pd.RegMR(r.Bytes(), allAccess|uverbs.AccessMWBind)
	if err != nil {
		r.Close()
		t.Fatalf("RegMR with MW_BIND access: %v", err)
	}
	t.Cleanup(func() {
		mr.Close()
		r.Close()
	})
	mw, err := e.b.pd.AllocMW(typ)
	if err != nil {
		// A device without memory windows (rxe before Linux 5.12: no
		// IB_DEVICE_MEM_WINDOW) must say so in its capabilities and
		// refuse the allocation as not supported; the test then ends.
		attr, qerr := e.b.ctx.QueryDevice()
		if qerr != nil {
			t.Fatalf("AllocMW(type %d): %v; QueryDevice: %v", typ, err, qerr)
		}
		if attr.CapFlags&uverbs.DeviceMemWindow == 0 && errors.Is(err, uverbs.ErrNotSupported) {
			t.Logf("the device has no memory windows (no MEM_WINDOW capability) and refused AllocMW(type %d): %v", typ, err)
			return nil
		}
		t.Fatalf("AllocMW(type %d): %v (capabilities %v)", typ, err, attr.CapFlags)
	}
	t.Cleanup(func() { mw.Close() }) // before the MR's cleanup: a bound window holds the MR
	return &mwFixture{a: a, b: b, mr: &buffer{r: r, mr: mr}, mw: mw, rkey: mw.RKey()}
}

// bind binds the window over [off, off+n) of the MR with access, from b's
// QP, waits for the bind's completion and returns it. On success the
// fixture's rkey is the window's new key.
func (e *env) bind(t *testing.T, f *mwFixture, id uint64, off, n int, access uverbs.Access) uverbs.WorkCompletion {
	t.Helper()
	b := uverbs.MWBind{MWRKey: f.rkey, NewRKey: incRKey(f.rkey), Access: uint32(access)}
	if n > 0 {
		b.MRLKey, b.Addr, b.Length = f.mr.mr.LKey(), f.mr.addr(off), uint64(n)
	}
	post(t, f.b.qp, uverbs.SendWR{ID: id, Opcode: uverbs.WRBindMW, Flags: uverbs.SendSignaled, Bind: b})
	w := e.wait(t, f.b.cq, 1)[0]
	if w.Status == uverbs.WCSuccess {
		f.rkey = b.NewRKey
	}
	return w
}

// access does one signaled RDMA WRITE (or READ) of n bytes from a to the
// window at MR offset off with key rkey and returns its completion.
func (e *env) access(t *testing.T, f *mwFixture, id uint64, op uverbs.WROpcode, off, n int, rkey uint32) uverbs.WorkCompletion {
	t.Helper()
	post(t, f.a.qp, uverbs.SendWR{ID: id, Opcode: op, Flags: uverbs.SendSignaled,
		RemoteAddr: f.mr.addr(off), RKey: rkey, SGL: []uverbs.SGE{f.a.buf.sge(0, n)}})
	return e.wait(t, f.a.cq, 1)[0]
}

func testMWBind(t *testing.T, e *env) {
	if e.iwarpNoMW(t, uverbs.MWType2) {
		return
	}
	f := e.mwFixture(t, uverbs.MWType2)
	if f == nil {
		return
	}
	old := f.rkey
	expect(t, e.bind(t, f, 0x301, mwOff, mwLen, uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead), 0x301, uverbs.WCSuccess, uverbs.WCBindMW)
	if f.rkey>>8 != old>>8 {
		t.Fatalf("bound key %#x has another index than the window's %#x", f.rkey, old)
	}

	// Inside the window: WRITE, then READ back what b holds there.
	fill(f.a.buf.bytes()[:256], 30)
	expect(t, e.access(t, f, 0x302, uverbs.WRRDMAWrite, mwOff+100, 256, f.rkey), 0x302, uverbs.WCSuccess, uverbs.WCRDMAWrite)
	if !bytes.Equal(f.mr.bytes()[mwOff+100:mwOff+356], f.a.buf.bytes()[:256]) {
		t.Errorf("the write through the window did not land at its address")
	}
	fill(f.mr.bytes()[mwOff+mwLen-64:mwOff+mwLen], 31)
	w := e.access(t, f, 0x303, uverbs.WRRDMARead, mwOff+mwLen-64, 64, f.rkey) // the window's last bytes
	expect(t, w, 0x303, uverbs.WCSuccess, uverbs.WCRDMARead)
	if w.ByteLen != 64 || !bytes.Equal(f.a.buf.bytes()[:64], f.mr.bytes()[mwOff+mwLen-64:mwOff+mwLen]) {
		t.Errorf("READ through the window: %s, data equal %v", fmtWC(w), bytes.Equal(f.a.buf.bytes()[:64], f.mr.bytes()[mwOff+mwLen-64:mwOff+mwLen]))
	}

	// Across the window's end: a remote access error (and a's QP is dead).
	// A device that checks only the MR's range goes across the MR's end.
	end, start := mwOff+mwLen, mwOff
	if e.o.MWChecksMRRangeOnly {
		t.Logf("the device checks an access through a window against the MR's range only (Options.MWChecksMRRangeOnly): testing the MR's bounds")
		end, start = mwMRSize, 0
	}
	before := append([]byte(nil), f.mr.bytes()...)
	expect(t, e.access(t, f, 0x304, uverbs.WRRDMAWrite, end-32, 64, f.rkey), 0x304, uverbs.WCRemAccessErr, 0)
	if !bytes.Equal(before, f.mr.bytes()) {
		t.Errorf("a refused write changed the memory")
	}

	// A READ before the window's start, on a new pair and window.
	g := e.mwFixture(t, uverbs.MWType2)
	expect(t, e.bind(t, g, 0x305, mwOff, mwLen, uverbs.AccessRemoteRead), 0x305, uverbs.WCSuccess, uverbs.WCBindMW)
	expect(t, e.access(t, g, 0x306, uverbs.WRRDMARead, start-8, 16, g.rkey), 0x306, uverbs.WCRemAccessErr, 0)

	// A write through a read-only window, and the window's old key.
	h := e.mwFixture(t, uverbs.MWType2)
	expect(t, e.bind(t, h, 0x307, mwOff, mwLen, uverbs.AccessRemoteRead), 0x307, uverbs.WCSuccess, uverbs.WCBindMW)
	expect(t, e.access(t, h, 0x308, uverbs.WRRDMARead, mwOff, 16, h.rkey), 0x308, uverbs.WCSuccess, uverbs.WCRDMARead)
	expect(t, e.access(t, h, 0x309, uverbs.WRRDMAWrite, mwOff, 16, h.rkey), 0x309, uverbs.WCRemAccessErr, 0)
	k := e.mwFixture(t, uverbs.MWType2)
	stale := k.rkey
	expect(t, e.bind(t, k, 0x30a, mwOff, mwLen, uverbs.AccessRemoteRead), 0x30a, uverbs.WCSuccess, uverbs.WCBindMW)
	expect(t, e.access(t, k, 0x30b, uverbs.WRRDMARead, mwOff, 16, stale), 0x30b, uverbs.WCRemAccessErr, 0)
}

func testMWBindType1(t *testing.T, e *env) {
	if e.iwarpNoMW(t, uverbs.MWType1) {
		return
	}
	if !e.o.MWType1ByPostSend {
		t.Skip("the device does not bind type 1 windows with a BIND_MW work request (Options.MWType1ByPostSend)")
	}
	f := e.mwFixture(t, uverbs.MWType1)
	if f == nil {
		return
	}
	// A type 1 window is valid from its allocation but covers nothing.
	old := f.rkey
	expect(t, e.bind(t, f, 0x311, mwOff, mwLen, uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead), 0x311, uverbs.WCSuccess, uverbs.WCBindMW)
	if f.rkey>>8 != old>>8 {
		t.Fatalf("bound key %#x has another index than the window's %#x", f.rkey, old)
	}
	fill(f.a.buf.bytes()[:128], 32)
	expect(t, e.access(t, f, 0x312, uverbs.WRRDMAWrite, mwOff, 128, f.rkey), 0x312, uverbs.WCSuccess, uverbs.WCRDMAWrite)
	if !bytes.Equal(f.mr.bytes()[mwOff:mwOff+128], f.a.buf.bytes()[:128]) {
		t.Errorf("the write through the type 1 window did not land at its address")
	}
	// A type 1 window is tied to the PD, not to the QP that bound it: a
	// second pair on the same PDs uses it too.
	c, d := e.pair(t, qpConfig{})
	post(t, c.qp, uverbs.SendWR{ID: 0x313, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
		RemoteAddr: f.mr.addr(mwOff), RKey: f.rkey, SGL: []uverbs.SGE{c.buf.sge(0, 128)}})
	expect(t, e.wait(t, c.cq, 1)[0], 0x313, uverbs.WCSuccess, uverbs.WCRDMARead)
	if !bytes.Equal(c.buf.bytes()[:128], f.a.buf.bytes()[:128]) {
		t.Errorf("the read through the type 1 window from a second QP differs")
	}
	// A type 1 window cannot be invalidated (IBTA o10-37.2.26): LOCAL_INV
	// of its key fails (posted on the second pair's receiving QP, of the
	// window's PD, which then is in error). The status varies: rxe on 6.1
	// completes it with a local QP operation error, on 6.12 the QP's
	// flush reaches the failed request first and it completes flushed.
	post(t, d.qp, uverbs.SendWR{ID: 0x316, Opcode: uverbs.WRLocalInv, Flags: uverbs.SendSignaled, InvalidateRKey: f.rkey})
	if w := e.wait(t, d.cq, 1)[0]; w.ID != 0x316 || w.Status == uverbs.WCSuccess {
		t.Errorf("LOCAL_INV of a type 1 window: %s, want an error", fmtWC(w))
	} else {
		t.Logf("LOCAL_INV of a type 1 window: %s", fmtWC(w))
	}
	// The window is still bound; a zero-length bind unbinds it: the key then
	// opens nothing.
	expect(t, e.access(t, f, 0x317, uverbs.WRRDMAWrite, mwOff, 16, f.rkey), 0x317, uverbs.WCSuccess, uverbs.WCRDMAWrite)
	expect(t, e.bind(t, f, 0x314, 0, 0, 0), 0x314, uverbs.WCSuccess, uverbs.WCBindMW)
	expect(t, e.access(t, f, 0x315, uverbs.WRRDMAWrite, mwOff, 16, f.rkey), 0x315, uverbs.WCRemAccessErr, 0)
}

func testLocalInv(t *testing.T, e *env) {
	if e.iwarpNoMW(t, uverbs.MWType2) {
		a, b := e.pair(t, qpConfig{})
		refused(t, b.qp, uverbs.SendWR{ID: 0x323, Opcode: uverbs.WRLocalInv, Flags: uverbs.SendSignaled, InvalidateRKey: b.buf.mr.RKey()})
		testSendRecvOn(t, e, a, b)
		return
	}
	f := e.mwFixture(t, uverbs.MWType2)
	if f == nil {
		return
	}
	expect(t, e.bind(t, f, 0x321, mwOff, mwLen, uverbs.AccessRemoteWrite), 0x321, uverbs.WCSuccess, uverbs.WCBindMW)
	expect(t, e.access(t, f, 0x322, uverbs.WRRDMAWrite, mwOff, 64, f.rkey), 0x322, uverbs.WCSuccess, uverbs.WCRDMAWrite)
	post(t, f.b.qp, uverbs.SendWR{ID: 0x323, Opcode: uverbs.WRLocalInv, Flags: uverbs.SendSignaled, InvalidateRKey: f.rkey})
	expect(t, e.wait(t, f.b.cq, 1)[0], 0x323, uverbs.WCSuccess, uverbs.WCLocalInv)
	expect(t, e.access(t, f, 0x324, uverbs.WRRDMAWrite, mwOff, 64, f.rkey), 0x324, uverbs.WCRemAccessErr, 0)
	// The invalidated window can be bound again (a new pair: a's QP is dead,
	// and the window is tied to the QP that binds it).
	g := e.mwFixture(t, uverbs.MWType2)
	expect(t, e.bind(t, g, 0x325, mwOff, mwLen, uverbs.AccessRemoteWrite), 0x325, uverbs.WCSuccess, uverbs.WCBindMW)
	post(t, g.b.qp, uverbs.SendWR{ID: 0x326, Opcode: uverbs.WRLocalInv, Flags: uverbs.SendSignaled, InvalidateRKey: g.rkey})
	expect(t, e.wait(t, g.b.cq, 1)[0], 0x326, uverbs.WCSuccess, uverbs.WCLocalInv)
	expect(t, e.bind(t, g, 0x327, 0, mwLen, uverbs.AccessRemoteWrite), 0x327, uverbs.WCSuccess, uverbs.WCBindMW)
	expect(t, e.access(t, g, 0x328, uverbs.WRRDMAWrite, 0, 64, g.rkey), 0x328, uverbs.WCSuccess, uverbs.WCRDMAWrite)
}

func testSendWithInv(t *testing.T, e *env) {
	if e.iwarpNoMW(t, uverbs.MWType2) {
		testSendWithInvMR(t, e)
		return
	}
	f := e.mwFixture(t, uverbs.MWType2)
	if f == nil {
		return
	}
	expect(t, e.bind(t, f, 0x331, mwOff, mwLen, uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead), 0x331, uverbs.WCSuccess, uverbs.WCBindMW)
	expect(t, e.access(t, f, 0x332, uverbs.WRRDMAWrite, mwOff, 64, f.rkey), 0x332, uverbs.WCSuccess, uverbs.WCRDMAWrite)
	fill(f.a.buf.bytes()[:48], 33)
	postRecv(t, f.b.qp, uverbs.RecvWR{ID: 0x3B1, SGL: []uverbs.SGE{f.b.buf.sge(0, 128)}})
	post(t, f.a.qp, uverbs.SendWR{ID: 0x333, Opcode: uverbs.WRSendWithInv, Flags: uverbs.SendSignaled, InvalidateRKey: f.rkey,
		SGL: []uverbs.SGE{f.a.buf.sge(0, 48)}})
	expect(t, e.wait(t, f.a.cq, 1)[0], 0x333, uverbs.WCSuccess, uverbs.WCSend)
	rw := e.wait(t, f.b.cq, 1)[0]
	expect(t, rw, 0x3B1, uverbs.WCSuccess, uverbs.WCRecv)
	if rw.Flags&uverbs.WCWithInv == 0 || rw.Flags&uverbs.WCWithImm != 0 || rw.Imm != f.rkey || rw.ByteLen != 48 {
		t.Errorf("receive completion %s flags %#x, want 48 bytes with the invalidated rkey %#x", fmtWC(rw), rw.Flags, f.rkey)
	}
	if !bytes.Equal(f.b.buf.bytes()[:48], f.a.buf.bytes()[:48]) {
		t.Errorf("received bytes differ")
	}
	expect(t, e.access(t, f, 0x334, uverbs.WRRDMARead, mwOff, 64, f.rkey), 0x334, uverbs.WCRemAccessErr, 0)
}

// testSendWithInvMR is SendWithInv without windows (iWARP): the SEND
// invalidates the receiver's MR, after which a READ through its rkey
// fails. siw's user-space completions carry no invalidated key.
func testSendWithInvMR(t *testing.T, e *env) {
	a, b := e.pair(t, qpConfig{})
	target := e.b.buffer(t, 4096)
	post(t, a.qp, uverbs.SendWR{ID: 0x332, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
		RemoteAddr: target.addr(0), RKey: target.mr.RKey(), SGL: []uverbs.SGE{a.buf.sge(0, 64)}})
	expect(t, e.wait(t, a.cq, 1)[0], 0x332, uverbs.WCSuccess, uverbs.WCRDMARead)
	fill(a.buf.bytes()[:48], 33)
	postRecv(t, b.qp, uverbs.RecvWR{ID: 0x3B1, SGL: []uverbs.SGE{b.buf.sge(0, 128)}})
	post(t, a.qp, uverbs.SendWR{ID: 0x333, Opcode: uverbs.WRSendWithInv, Flags: uverbs.SendSignaled, InvalidateRKey: target.mr.RKey(),
		SGL: []uverbs.SGE{a.buf.sge(0, 48)}})
	expect(t, e.wait(t, a.cq, 1)[0], 0x333, uverbs.WCSuccess, uverbs.WCSend)
	rw := e.wait(t, b.cq, 1)[0]
	expect(t, rw, 0x3B1, uverbs.WCSuccess, uverbs.WCRecv)
	if rw.ByteLen != 48 || !bytes.Equal(b.buf.bytes()[:48], a.buf.bytes()[:48]) {
		t.Errorf("receive completion %s: want the 48 bytes sent", fmtWC(rw))
	}
	post(t, a.qp, uverbs.SendWR{ID: 0x334, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
		RemoteAddr: target.addr(0), RKey: target.mr.RKey(), SGL: []uverbs.SGE{a.buf.sge(0, 64)}})
	if w := e.wait(t, a.cq, 1)[0]; w.ID != 0x334 || w.Status == uverbs.WCSuccess {
		t.Errorf("READ through the invalidated MR's rkey: %s, want an error", fmtWC(w))
	}
}
