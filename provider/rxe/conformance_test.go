package rxe_test

import (
	"flag"
	"testing"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/test/conformance"
	"github.com/goverbs/goverbs/uverbs"
)

// nothingLost scales the NothingLost test: 20,000 requests by default, since
// the rig runs rxe under TCG (about 10 µs of guest time per request becomes
// much more); -rxe.long posts a million.
var (
	nothingLost = flag.Int("rxe.nothinglost", 20000, "work requests the NothingLost conformance test posts")
	long        = flag.Bool("rxe.long", false, "long mode: NothingLost posts 1,000,000 work requests")
)

// rigDevice returns the rig's rxe device called name: outside the rig the
// test skips, inside it a missing device fails it.
func rigDevice(t testing.TB, name string) uverbs.Device {
	t.Helper()
	rigtest.Require(t)
	rigtest.Device(t, name)
	d, err := uverbs.DeviceByName(name)
	if err != nil {
		t.Fatalf("DeviceByName(%s): %v", name, err)
	}
	if d.Driver != uverbs.DriverRXE {
		t.Fatalf("%s has driver %v, want rxe", name, d.Driver)
	}
	return d
}

// rxeOptions are rxe0's facts for the suite: RoCEv2 with the IPv4 GID at
// index 1, one write() doorbell per PostSend call, and type 1 memory
// windows bound by BIND_MW work requests. An access through a window is
// checked against its MR's range only (rxe_resp.c check_rkey, Linux 6.1 and
// 6.12): the suite cannot see a window's bounds enforced.
func rxeOptions() conformance.Options {
	n := *nothingLost
	if *long {
		n = 1_000_000
	}
	return conformance.Options{GIDIndex: 1, DoorbellsPerPostSend: 1, NothingLostWRs: n,
		MWType1ByPostSend: true, MWChecksMRRangeOnly: true}
}

// TestConformance runs the suite in loopback on rxe0.
func TestConformance(t *testing.T) {
	conformance.Run(t, rigDevice(t, "rxe0"), rxeOptions())
}

// TestConformanceCross runs it from rxea to rxeb, two rxe devices wired by
// a veth pair (10.99.0.1 and 10.99.0.2, GID index 1 each).
func TestConformanceCross(t *testing.T) {
	a, b := rigDevice(t, "rxea"), rigDevice(t, "rxeb")
	o := rxeOptions()
	o.Peer, o.PeerGIDIndex = &b, 1
	conformance.Run(t, a, o)
}
