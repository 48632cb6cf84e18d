package siw_test

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/cmloop"
	"github.com/goverbs/goverbs/internal/lifetest"
	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/test/conformance"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

var (
	nothingLost = flag.Int("siw.nothinglost", 20000, "work requests the NothingLost conformance test posts")
	long        = flag.Bool("siw.long", false, "long mode: NothingLost posts 1,000,000 work requests")
)

// cmConnect connects two siw QPs in RESET through rdma_cm on siw0's
// address, a dialing and b accepting (iWARP QPs reach RTS only so), with
// an IRD and ORD of 4 each for RDMA READs.
func cmConnect(t *testing.T, a, b *uverbs.QP) {
	t.Helper()
	closer := cmPairConfig(t, a, b, rdmacm.Config{ResponderResources: 4, InitiatorDepth: 4})
	// Cleanups run last-in first-out: the connections close (and
	// disconnect) before the suite destroys the QPs.
	t.Cleanup(closer)
}

// cmPairConfig connects a (dialing) and b (accepting) with cfg and
// returns the closer of both connections.
func cmPairConfig(t *testing.T, a, b *uverbs.QP, cfg rdmacm.Config) func() {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dial := cfg
	dial.QP = a
	ca, cb, err := cmloop.Connect(ctx, addrSIW0, &cfg, &dial, b)
	if err != nil {
		t.Fatal("connect:", err)
	}
	return func() { ca.Close(); cb.Close() }
}

func siwOptions() conformance.Options {
	n := *nothingLost
	if *long {
		n = 1_000_000
	}
	return conformance.Options{DoorbellsPerPostSend: 1, NothingLostWRs: n, Connect: cmConnect, IWARP: true,
		Timeout: 60 * time.Second}
}

// TestConformance runs the suite on siw0, its QPs connected in loopback by
// rdma_cm.
func TestConformance(t *testing.T) {
	rigtest.Require(t)
	rigtest.Device(t, "siw0")
	d, err := uverbs.DeviceByName("siw0")
	if err != nil {
		t.Fatal(err)
	}
	if d.Driver != uverbs.DriverSIW {
		t.Fatalf("siw0 has driver %v", d.Driver)
	}
	conformance.Run(t, d, siwOptions())
}

var stressRounds = flag.Int("siw.stress.rounds", 20, "teardown rounds in TestStressRig")

// cmPair connects a and b through rdma_cm and returns the closer.
func cmPair(t *testing.T, a, b *uverbs.QP) func() {
	t.Helper()
	return cmPairConfig(t, a, b, rdmacm.Config{})
}

// TestStressRig: 16 RC QPs on siw0 in pairs connected by rdma_cm over 4
// CQs, posters and waiters on every queue, torn down at random moments.
func TestStressRig(t *testing.T) {
	rigtest.Require(t)
	rigtest.Device(t, "siw0")
	d, err := uverbs.DeviceByName("siw0")
	if err != nil {
		t.Fatal(err)
	}
	lifetest.Stress(t, d, lifetest.StressOptions{QPs: 16, CQs: 4, Rounds: *stressRounds, MaxDelay: 50 * time.Millisecond,
		Connect: cmPair, Refusals: []error{unix.EINVAL, unix.ENOTCONN}})
}
