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
				want := "ioctl"
				if p == PolicyWrite {
					want = "write"
				}
				if tr := c.Transports()["CreateCQ"]; tr.String() != want {
					t.Errorf("%v: CreateCQ went by %v, want %s", p, tr, want)
				}
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
