package mlx5_test

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// mwPair is two connected RC QPs on one model device, each with its own CQ
// (a sends, b owns the windows), and an MR on the shared PD registered with
// access for windows.
type mwPair struct {
	d      *model.Device
	n      *node
	a, b   *uverbs.QP
	ca, cb *uverbs.CQ
	win    *mmap.Region
	mr     *uverbs.MR
}

func newMWPair(t *testing.T, mrAccess uverbs.Access) *mwPair {
	t.Helper()
	d, dev := newModel(t, nil, model.Options{})
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	p := &mwPair{d: d, n: n, ca: n.cq(32, nil), cb: n.cq(32, nil)}
	p.a, p.b = n.qp(uverbs.QPTypeRC, p.ca, cap1), n.qp(uverbs.QPTypeRC, p.cb, cap1)
	connect(t, p.a, p.b.QPN(), lidTo(d))
	connect(t, p.b, p.a.QPN(), lidTo(d))
	var err error
	if p.win, err = mmap.Anonymous(1 << 16); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.win.Close() })
	if p.mr, err = n.pd.RegMR(p.win.Bytes(), mrAccess); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.mr.Close() })
	return p
}

func (p *mwPair) alloc(t *testing.T, typ uverbs.MWType) *uverbs.MW {
	t.Helper()
	mw, err := p.n.pd.AllocMW(typ)
	if err != nil {
		t.Fatalf("AllocMW(%d): %v", typ, err)
	}
	t.Cleanup(func() { mw.Close() })
	return mw
}

func (p *mwPair) addr(off int) uint64 { return uint64(p.win.Addr()) + uint64(off) }

// bind posts a bind of mw's key k to [off, off+n) from qp and returns its
// completion.
func (p *mwPair) bind(t *testing.T, qp *uverbs.QP, cq *uverbs.CQ, k uint32, off, n int, acc uverbs.Access) uverbs.WorkCompletion {
	t.Helper()
	b := uverbs.MWBind{MWRKey: k, NewRKey: uverbs.IncRKey(k), MRLKey: p.mr.LKey(), Addr: p.addr(off), Length: uint64(n), Access: uint32(acc)}
	if _, err := qp.PostSend([]uverbs.SendWR{{ID: 0xb1, Opcode: uverbs.WRBindMW, Flags: uverbs.SendSignaled, Bind: b}}); err != nil {
		t.Fatalf("PostSend(BIND_MW): %v", err)
	}
	return poll(t, cq, 1)[0]
}

func (p *mwPair) write(t *testing.T, rkey uint32, off, n int) uverbs.WorkCompletion {
	t.Helper()
	if _, err := p.a.PostSend([]uverbs.SendWR{{ID: 0xa1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		RemoteAddr: p.addr(off), RKey: rkey, SGL: []uverbs.SGE{p.n.sge(0, n)}}}); err != nil {
		t.Fatalf("PostSend(WRITE): %v", err)
	}
	return poll(t, p.ca, 1)[0]
}

func status(t *testing.T, what string, w uverbs.WorkCompletion, want uverbs.WCStatus) {
	t.Helper()
	if w.Status != want {
		t.Errorf("%s: %+v, want status %v", what, w, want)
	}
}

// TestMWRefusals: what ConnectX refuses when binding, invalidating and
// using windows (the IBTA's rules, which the model enforces) reaches the
// program as the completion status real hardware gives, and the window is
// left as it was.
func TestMWRefusals(t *testing.T) {
	const mwAcc = uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead
	t.Run("mr-without-mw-bind", func(t *testing.T) {
		p := newMWPair(t, allAccess)
		mw := p.alloc(t, uverbs.MWType2)
		status(t, "bind over an MR without MW_BIND", p.bind(t, p.b, p.cb, mw.RKey(), 0, 4096, mwAcc), uverbs.WCMWBindErr)
	})
	t.Run("outside-the-mr", func(t *testing.T) {
		p := newMWPair(t, allAccess|uverbs.AccessMWBind)
		mw := p.alloc(t, uverbs.MWType2)
		status(t, "bind past the MR's end", p.bind(t, p.b, p.cb, mw.RKey(), 1<<16-64, 128, mwAcc), uverbs.WCMWBindErr)
	})
	t.Run("remote-write-over-read-only-mr", func(t *testing.T) {
		p := newMWPair(t, uverbs.AccessRemoteRead|uverbs.AccessMWBind)
		mw := p.alloc(t, uverbs.MWType2)
		status(t, "remote write window over an MR without local write", p.bind(t, p.b, p.cb, mw.RKey(), 0, 64, uverbs.AccessRemoteWrite), uverbs.WCMWBindErr)
	})
	t.Run("type2-bound-twice", func(t *testing.T) {
		p := newMWPair(t, allAccess|uverbs.AccessMWBind)
		mw := p.alloc(t, uverbs.MWType2)
		k := mw.RKey()
		status(t, "first bind", p.bind(t, p.b, p.cb, k, 0, 4096, mwAcc), uverbs.WCSuccess)
		k = uverbs.IncRKey(k)
		status(t, "second bind of a bound type 2 window", p.bind(t, p.b, p.cb, k, 0, 4096, mwAcc), uverbs.WCMWBindErr)
	})
	t.Run("type2-tied-to-its-qp", func(t *testing.T) {
		p := newMWPair(t, allAccess|uverbs.AccessMWBind)
		mw := p.alloc(t, uverbs.MWType2)
		// Bound from a (the sender's QP): b, where the write arrives, may
		// not use it.
		status(t, "bind from a", p.bind(t, p.a, p.ca, mw.RKey(), 0, 4096, mwAcc), uverbs.WCSuccess)
		status(t, "write through a window bound to another QP", p.write(t, uverbs.IncRKey(mw.RKey()), 0, 64), uverbs.WCRemAccessErr)
	})
	t.Run("local-inv-by-another-qp", func(t *testing.T) {
		p := newMWPair(t, allAccess|uverbs.AccessMWBind)
		mw := p.alloc(t, uverbs.MWType2)
		status(t, "bind from b", p.bind(t, p.b, p.cb, mw.RKey(), 0, 4096, mwAcc), uverbs.WCSuccess)
		k := uverbs.IncRKey(mw.RKey())
		if _, err := p.a.PostSend([]uverbs.SendWR{{ID: 0xa2, Opcode: uverbs.WRLocalInv, Flags: uverbs.SendSignaled, InvalidateRKey: k}}); err != nil {
			t.Fatal(err)
		}
		status(t, "LOCAL_INV from a QP the window is not bound to", poll(t, p.ca, 1)[0], uverbs.WCMWBindErr)
	})
	t.Run("send-with-inv-of-an-mr", func(t *testing.T) {
		p := newMWPair(t, allAccess|uverbs.AccessMWBind)
		if _, err := p.b.PostRecv([]uverbs.RecvWR{{ID: 0xc1, SGL: []uverbs.SGE{p.n.sge(4096, 64)}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.a.PostSend([]uverbs.SendWR{{ID: 0xa3, Opcode: uverbs.WRSendWithInv, Flags: uverbs.SendSignaled,
			InvalidateRKey: p.mr.RKey(), SGL: []uverbs.SGE{p.n.sge(0, 16)}}}); err != nil {
			t.Fatal(err)
		}
		status(t, "SEND_WITH_INV naming an MR (not remotely invalidable)", poll(t, p.ca, 1)[0], uverbs.WCRemInvReqErr)
		status(t, "its receive", poll(t, p.cb, 1)[0], uverbs.WCLocQPOpErr)
	})
	t.Run("pd-busy", func(t *testing.T) {
		_, dev := newModel(t, nil, model.Options{})
		ctx, err := uverbs.Open(dev)
		if err != nil {
			t.Fatal(err)
		}
		defer ctx.Close()
		pd, err := ctx.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		mw, err := pd.AllocMW(uverbs.MWType1)
		if err != nil {
			t.Fatal(err)
		}
		if err := pd.Close(); !errors.Is(err, unix.EBUSY) {
			t.Errorf("PD.Close with a window = %v, want EBUSY", err)
		}
		if err := mw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := pd.Close(); err != nil {
			t.Errorf("PD.Close after MW.Close: %v", err)
		}
	})
}
