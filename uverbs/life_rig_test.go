package uverbs_test

import (
	"testing"

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
