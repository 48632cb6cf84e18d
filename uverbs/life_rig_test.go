package uverbs_test

import (
	"flag"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/lifetest"
	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/uverbs"
)

func lifeDevice(t *testing.T, name string) uverbs.Device {
	t.Helper()
	rigtest.Device(t, name)
	d, err := uverbs.DeviceByName(name)
	if err != nil {
		t.Fatalf("DeviceByName(%s): %v", name, err)
	}
	return d
}

// TestHandleReuseRig: on the real kernel, which gives a new object the
// lowest free handle, no verb on a closed object reaches the kernel or
// touches the object that inherited its handle.
func TestHandleReuseRig(t *testing.T) {
	rigtest.Require(t)
	t.Run("rxe0", func(t *testing.T) {
		d := lifeDevice(t, "rxe0")
		c, err := uverbs.Open(d)
		if err != nil {
			t.Fatal(err)
		}
		g, err := c.QueryGID(1, 1)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		ah := &uverbs.AHAttr{PortNum: 1, GRH: &uverbs.GlobalRoute{DGID: g.GID, SGIDIndex: 1, HopLimit: 64}}
		lifetest.HandleReuse(t, d, lifetest.Options{AH: ah, WantReuse: true})
	})
	t.Run("siw0", func(t *testing.T) {
		lifetest.HandleReuse(t, lifeDevice(t, "siw0"), lifetest.Options{WantReuse: true})
	})
}

var (
	stressRounds = flag.Int("stress.rounds", 30, "teardown rounds in TestStressRig")
	stressWRs    = flag.Int64("stress.wrs", 0, "work requests TestStressRig posts at least (rounds go on until then)")
)

// TestStressRig: 16 RC QPs on rxe0 in loopback pairs over 4 CQs, posters
// and waiters on every queue, torn down at random moments (build with
// -race to run it under the race detector). make test runs 30 rounds per
// kernel; issue 11's scale is -stress.rounds=1000 -stress.wrs=1000000
// (about 3 s a round under TCG on a loaded host).
func TestStressRig(t *testing.T) {
	rigtest.Require(t)
	d := lifeDevice(t, "rxe0")
	c, err := uverbs.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.QueryGID(1, 1)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	av := uverbs.AHAttr{PortNum: 1, GRH: &uverbs.GlobalRoute{DGID: g.GID, SGIDIndex: 1, HopLimit: 64}}
	lifetest.Stress(t, d, lifetest.StressOptions{AH: av, QPs: 16, CQs: 4, Rounds: *stressRounds, WRs: *stressWRs, MaxDelay: 50 * time.Millisecond})
}
