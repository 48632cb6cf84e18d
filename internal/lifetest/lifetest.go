// Package lifetest holds lifetime tests that run on any device: in the rig
// on the real kernel (uverbs' rig tests) and on the host on the mlx5 device
// model (provider/mlx5's tests).
package lifetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/uverbs"
)

// Options say what the device under test has.
type Options struct {
	// AH is an address to create address handles for (nil: no AH).
	AH *uverbs.AHAttr
	// WantReuse fails the test if the kernel gave no closed object's
	// handle to a new object (the real kernel gives the lowest free one).
	WantReuse bool
}

// objects is one of each object type.
type objects struct {
	ch  *uverbs.CompChannel
	pd  *uverbs.PD
	mr  *uverbs.MR
	cq  *uverbs.CQ
	srq *uverbs.SRQ
	qp  *uverbs.QP
	mw  *uverbs.MW // nil where the device has no memory windows
	ah  *uverbs.AH // nil without Options.AH
}

func create(t *testing.T, c *uverbs.Context, buf []byte, access uverbs.Access, o Options) *objects {
	t.Helper()
	var s objects
	var err error
	if s.ch, err = c.CreateCompChannel(); err != nil {
		t.Fatal(err)
	}
	if s.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if s.mr, err = s.pd.RegMR(buf, access); err != nil {
		t.Fatal(err)
	}
	if s.cq, err = c.CreateCQ(16, uverbs.CQOptions{Channel: s.ch}); err != nil {
		t.Fatal(err)
	}
	if s.srq, err = s.pd.CreateSRQ(uverbs.SRQInit{MaxWR: 8, MaxSGE: 1, Limit: 2}); err != nil {
		t.Fatal(err)
	}
	if s.qp, err = s.pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.Fatal(err)
	}
	if s.mw, err = s.pd.AllocMW(uverbs.MWType2); err != nil {
		if !errors.Is(err, uverbs.ErrNotSupported) {
			t.Logf("AllocMW: %v (no memory windows in this test)", err)
		}
		s.mw = nil
	}
	if o.AH != nil {
		if s.ah, err = s.pd.CreateAH(*o.AH); err != nil {
			t.Fatal(err)
		}
	}
	return &s
}

// closeAll closes s's objects, dependents first.
func (s *objects) closeAll(t *testing.T) {
	t.Helper()
	for _, c := range s.closers() {
		if err := c.close(); err != nil {
			t.Fatalf("%s.Close: %v", c.name, err)
		}
	}
}

type closer struct {
	name  string
	close func() error
}

func (s *objects) closers() []closer {
	cs := []closer{{"QP", s.qp.Close}, {"SRQ", s.srq.Close}}
	if s.mw != nil {
		cs = append(cs, closer{"MW", s.mw.Close})
	}
	if s.ah != nil {
		cs = append(cs, closer{"AH", s.ah.Close})
	}
	return append(cs, closer{"MR", s.mr.Close}, closer{"CQ", s.cq.Close}, closer{"PD", s.pd.Close}, closer{"CompChannel", s.ch.Close})
}

func (s *objects) handles() map[string]uint32 {
	m := map[string]uint32{"PD": s.pd.Handle(), "MR": s.mr.Handle(), "CQ": s.cq.Handle(), "SRQ": s.srq.Handle(), "QP": s.qp.Handle()}
	if s.mw != nil {
		m["MW"] = s.mw.Handle()
	}
	if s.ah != nil {
		m["AH"] = s.ah.Handle()
	}
	return m
}

// verb is one call on a closed object, and the verb name its error names.
type verb struct {
	name string
	call func() error
}

// verbsOn is every verb of s's objects (besides Close), with arguments
// that would succeed on open objects.
func (s *objects) verbsOn(buf []byte, base uint64, o Options) []verb {
	sge := []uverbs.SGE{{Addr: base, Length: 64, LKey: s.mr.LKey()}}
	vs := []verb{
		{"RegMR", func() error { _, err := s.pd.RegMR(buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite); return err }},
		{"CreateQP", func() error {
			_, err := s.pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: s.cq, RecvCQ: s.cq, Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
			return err
		}},
		{"AllocMW", func() error { _, err := s.pd.AllocMW(uverbs.MWType2); return err }},
		{"CreateSRQ", func() error { _, err := s.pd.CreateSRQ(uverbs.SRQInit{MaxWR: 4, MaxSGE: 1}); return err }},
		{"ReregMR", func() error {
			return s.mr.Rereg(uverbs.ReregAttr{Access: uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead}, uverbs.ReregAccess)
		}},
		{"ReqNotifyCQ", func() error { return s.cq.ReqNotify(false) }},
		{"ResizeCQ", func() error { return s.cq.Resize(64) }},
		{"PollCQ", func() error { _, err := s.cq.Poll(make([]uverbs.WorkCompletion, 4)); return err }},
		{"CQ.Wait", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := s.cq.Wait(ctx, make([]uverbs.WorkCompletion, 4))
			return err
		}},
		{"CompChannel.Wait", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := s.ch.Wait(ctx)
			return err
		}},
		{"ModifySRQ", func() error { return s.srq.Modify(uverbs.SRQAttr{Limit: 1}, uverbs.SRQAttrLimit) }},
		{"QuerySRQ", func() error { _, err := s.srq.Query(); return err }},
		{"PostSRQRecv", func() error { _, err := s.srq.PostRecv([]uverbs.RecvWR{{ID: 1, SGL: sge}}); return err }},
		{"ModifyQP", func() error {
			return s.qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: uverbs.AccessRemoteWrite},
				uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags)
		}},
		{"QueryQP", func() error { _, _, err := s.qp.Query(uverbs.QPAttrState); return err }},
		{"PostSend", func() error {
			_, err := s.qp.PostSend([]uverbs.SendWR{{ID: 1, Opcode: uverbs.WRSend, SGL: sge, Flags: uverbs.SendSignaled}})
			return err
		}},
		{"PostRecv", func() error { _, err := s.qp.PostRecv([]uverbs.RecvWR{{ID: 1, SGL: sge}}); return err }},
	}
	if o.AH != nil {
		vs = append(vs, verb{"CreateAH", func() error { _, err := s.pd.CreateAH(*o.AH); return err }})
	}
	return vs
}

// checkClosed runs every verb on s's closed objects and checks each fails
// with ErrClosed, in an *uverbs.OpError naming the verb, without a syscall.
func checkClosed(t *testing.T, c *uverbs.Context, s *objects, buf []byte, base uint64, o Options, after string) {
	t.Helper()
	before := c.Syscalls()
	for _, v := range s.verbsOn(buf, base, o) {
		err := v.call()
		var oe *uverbs.OpError
		switch {
		case !errors.Is(err, uverbs.ErrClosed):
			t.Errorf("after %s: %s = %v, want ErrClosed", after, v.name, err)
		case !errors.As(err, &oe):
			t.Errorf("after %s: %s error %v (%T) is not an *OpError", after, v.name, err, err)
		case oe.Verb != v.name:
			t.Errorf("after %s: %s error names verb %q: %v", after, v.name, oe.Verb, err)
		}
	}
	if n := c.Syscalls() - before; n != 0 {
		t.Errorf("after %s: verbs on closed objects made %d syscalls, want 0", after, n)
	}
	for _, cl := range s.closers() {
		for i := 0; i < 2; i++ {
			if err := cl.close(); err != nil {
				t.Errorf("after %s: %s.Close #%d = %v, want nil", after, cl.name, i+1, err)
			}
		}
	}
}

// HandleReuse creates one object of every type, closes them, creates a
// second set (which the kernel gives the freed handles), and proves that
// every verb on every closed object returns ErrClosed without a syscall and
// leaves the live objects as they were; then it closes the context and
// proves the same of the live set.
func HandleReuse(t *testing.T, dev uverbs.Device, o Options) {
	c, err := uverbs.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	region, err := mmap.Anonymous(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer region.Close()
	buf := region.Bytes()

	old := create(t, c, buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead, o)
	oldHandles := old.handles()
	old.closeAll(t)

	live := create(t, c, buf, uverbs.AccessLocalWrite, o)
	reused := 0
	for name, h := range live.handles() {
		if oh, ok := oldHandles[name]; ok && oh == h {
			reused++
			t.Logf("%s handle %d reused", name, h)
		}
	}
	if o.WantReuse && reused == 0 {
		t.Errorf("no handle reused (old %v, live %v): the test proves nothing here", oldHandles, live.handles())
	}
	// Put the live set in a known state to compare after.
	if err := live.qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: uverbs.AccessLocalWrite},
		uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	snap := snapshot(t, live)

	checkClosed(t, c, old, buf, uint64(region.Addr()), o, "Close")

	// Nothing live changed: the QP's state and access, the SRQ's limit,
	// the MR's keys, the CQ's contents; and the PD holds nothing more (its
	// Close at the end succeeds only if no MR or QP was created in it by a
	// stale handle).
	if after := snapshot(t, live); after != snap {
		t.Errorf("live objects changed by verbs on closed objects:\nbefore %+v\nafter  %+v", snap, after)
	}

	// Second round: the context closes under the live set.
	if err := c.Close(); err != nil {
		t.Fatalf("Context.Close: %v", err)
	}
	checkClosed(t, c, live, buf, uint64(region.Addr()), o, "Context.Close")
}

// state is what the test can observe of the live objects.
type state struct {
	QPState  uverbs.QPState
	QPAccess uverbs.Access
	SRQLimit uint32
	LKey     uint32
	RKey     uint32
	Polled   int
	PollErr  string
}

func snapshot(t *testing.T, s *objects) state {
	t.Helper()
	a, _, err := s.qp.Query(uverbs.QPAttrState | uverbs.QPAttrAccessFlags)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := s.srq.Query()
	if err != nil {
		t.Fatal(err)
	}
	st := state{QPState: a.State, QPAccess: a.AccessFlags, SRQLimit: sa.Limit, LKey: s.mr.LKey(), RKey: s.mr.RKey()}
	st.Polled, err = s.cq.Poll(make([]uverbs.WorkCompletion, 4))
	if err != nil {
		st.PollErr = err.Error() // siw has no fast path yet: the same error both times
	}
	return st
}
