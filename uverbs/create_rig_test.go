package uverbs

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/internal/rigtest"
	"golang.org/x/sys/unix"
)

// TestRigCreateCQTransportsAgree creates CQs by the flat path (PolicyAuto
// without a recorder: abi.File.FlatMethod), the builder's ioctl and the
// write command, and checks that they agree: the size the kernel gave,
// with and without a completion channel, and the kernel's refusal of a
// size past the device's maximum, after which a create succeeds again.
func TestRigCreateCQTransportsAgree(t *testing.T) {
	rigtest.Require(t)
	for _, name := range []string{"rxe0", "siw0"} {
		t.Run(name, func(t *testing.T) {
			policies := []CommandPolicy{PolicyAuto, PolicyIoctl, PolicyWrite}
			var sizes [][2]int
			for _, p := range policies {
				c := openRig(t, name, p)
				ch, err := c.CreateCompChannel()
				if err != nil {
					t.Fatal(err)
				}
				var got [2]int
				var cqs [2]*CQ
				for i, o := range []CQOptions{{}, {Channel: ch}} {
					if cqs[i], err = c.CreateCQ(100, o); err != nil {
						t.Fatalf("%v: CreateCQ(100, channel %v): %v", p, o.Channel != nil, err)
					}
					got[i] = cqs[i].CQE()
				}
				if cqs[0].Handle() == cqs[1].Handle() {
					t.Errorf("%v: two CQs with handle %d", p, cqs[0].Handle())
				}
				for _, cq := range cqs {
					if err := cq.Close(); err != nil {
						t.Fatalf("%v: Close: %v", p, err)
					}
				}
				sizes = append(sizes, got)
				checkTransport(t, c, "CreateCQ", p)
				a, err := c.QueryDevice()
				if err != nil {
					t.Fatal(err)
				}
				_, err = c.CreateCQ(int(a.MaxCQE)+1, CQOptions{})
				var oe *OpError
				if !errors.As(err, &oe) || oe.Verb != "CreateCQ" || !errors.Is(err, unix.EINVAL) {
					t.Errorf("%v: CreateCQ past max_cqe %d: %v; want the kernel's EINVAL naming CreateCQ", p, a.MaxCQE, err)
				}
				cq, err := c.CreateCQ(1, CQOptions{})
				if err != nil {
					t.Fatalf("%v: CreateCQ after a refused one: %v", p, err)
				}
				cq.Close()
				ch.Close()
			}
			for i, s := range sizes {
				if s[0] < 100 || s != sizes[0] {
					t.Errorf("%v: CQE %v, want ≥ 100 and as %v's %v", policies[i], s, policies[0], sizes[0])
				}
			}
			t.Logf("CQE of a 100-entry CQ: %d", sizes[0][0])
		})
	}
}

// TestRigCreateQPTransportsAgree creates RC QPs by the flat path, the
// builder's ioctl and the write command, and checks that they agree on
// the capacities the kernel gave and that the QP numbers are distinct and
// not 0. (The rig's other tests move data on QPs the flat path made.)
func TestRigCreateQPTransportsAgree(t *testing.T) {
	rigtest.Require(t)
	for _, name := range []string{"rxe0", "siw0"} {
		t.Run(name, func(t *testing.T) {
			policies := []CommandPolicy{PolicyAuto, PolicyIoctl, PolicyWrite}
			var caps []QPCap
			for _, p := range policies {
				c := openRig(t, name, p)
				pd, err := c.AllocPD()
				if err != nil {
					t.Fatal(err)
				}
				cq, err := c.CreateCQ(64, CQOptions{})
				if err != nil {
					t.Fatal(err)
				}
				init := QPInit{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, SignalAll: true,
					Cap: QPCap{MaxSendWR: 20, MaxRecvWR: 30, MaxSendSGE: 2, MaxRecvSGE: 3, MaxInlineData: 16}}
				var qps [2]*QP
				for i := range qps {
					if qps[i], err = pd.CreateQP(init); err != nil {
						t.Fatalf("%v: CreateQP: %v", p, err)
					}
				}
				if qps[0].QPN() == 0 || qps[0].QPN() == qps[1].QPN() || qps[0].Handle() == qps[1].Handle() {
					t.Errorf("%v: QPNs %d and %d, handles %d and %d: want distinct QPNs, not 0, and distinct handles",
						p, qps[0].QPN(), qps[1].QPN(), qps[0].Handle(), qps[1].Handle())
				}
				got := qps[0].Cap()
				if got.MaxSendWR < 20 || got.MaxRecvWR < 30 || got.MaxSendSGE < 2 || got.MaxRecvSGE < 3 {
					t.Errorf("%v: Cap %+v, want at least what was asked (%+v)", p, got, init.Cap)
				}
				caps = append(caps, got)
				checkTransport(t, c, "CreateQP", p)
				for _, qp := range qps {
					if err := qp.Close(); err != nil {
						t.Fatalf("%v: Close: %v", p, err)
					}
				}
				cq.Close()
				pd.Close()
			}
			for i, cp := range caps {
				if cp != caps[0] {
					t.Errorf("%v: Cap %+v, want %v's %+v", policies[i], cp, policies[0], caps[0])
				}
			}
			t.Logf("Cap of a QP asked for 20/30 WRs, 2/3 SGEs, 16 B inline: %+v", caps[0])
		})
	}
}

// checkTransport checks that verb's last call on c went by the transport
// policy p asks for (the flat path is ioctl's).
func checkTransport(t *testing.T, c *Context, verb string, p CommandPolicy) {
	t.Helper()
	want := "ioctl"
	if p == PolicyWrite {
		want = "write"
	}
	if tr := c.Transports()[verb]; tr.String() != want {
		t.Errorf("%v: %s went by %v, want %s", p, verb, tr, want)
	}
}

// TestRigOpenTransportsAgree opens contexts by the flat path (PolicyAuto:
// GET_CONTEXT and ASYNC_EVENT_ALLOC by abi.File.FlatMethod), the
// builder's ioctl and the write command (which returns the async fd with
// the context), and checks that they agree on what the kernel said: the
// completion vectors, the core support bits, an async event file that is
// open and the kernel's (an event channel's fd reads EAGAIN when empty).
func TestRigOpenTransportsAgree(t *testing.T) {
	rigtest.Require(t)
	for _, name := range []string{"rxe0", "siw0"} {
		t.Run(name, func(t *testing.T) {
			type opened struct {
				vectors int
				support uint64
			}
			var got []opened
			policies := []CommandPolicy{PolicyAuto, PolicyIoctl, PolicyWrite}
			for _, p := range policies {
				c := openRig(t, name, p)
				checkTransport(t, c, "Open", p)
				fd := c.asyncFd
				if fd < 0 {
					t.Fatalf("%v: no async event fd", p)
				}
				unix.SetNonblock(fd, true)
				var buf [16]byte
				if _, err := unix.Read(fd, buf[:]); err != unix.EAGAIN {
					t.Errorf("%v: read of the empty async event fd %d: %v, want EAGAIN", p, fd, err)
				}
				got = append(got, opened{c.NumCompVectors(), c.coreSupport})
				if err := c.Close(); err != nil {
					t.Fatalf("%v: Close: %v", p, err)
				}
				if err := unix.Close(fd); err != unix.EBADF {
					t.Errorf("%v: the async event fd %d after Close: close says %v, want EBADF", p, fd, err)
				}
			}
			for i, o := range got {
				if o.vectors < 1 || o.vectors != got[0].vectors {
					t.Errorf("%v: %d completion vectors, want ≥ 1 and as %v's %d", policies[i], o.vectors, policies[0], got[0].vectors)
				}
				// The write command has no core support answer (0).
				if policies[i] != PolicyWrite && o.support != got[0].support {
					t.Errorf("%v: core support %#x, want %v's %#x", policies[i], o.support, policies[0], got[0].support)
				}
			}
			t.Logf("completion vectors %d, core support %#x", got[0].vectors, got[0].support)
		})
	}
}
