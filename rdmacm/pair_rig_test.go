package rdmacm_test

import (
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
)

// TestRigPairPeer is goverbs' side of the two-machine steps with rdma-core's
// ucmatose and udaddy (test/rig/guest/pair-cm.sh, run by pair.sh --cm):
// RDMACM_PAIR_PEER names the role and RDMACM_PAIR_ADDR the address to
// listen on (a server) or to connect to (a client), the other guest's:
//
//	ucmatose-client  ucmConns connections to ADDR:7471, ucmatose's protocol
//	ucmatose-server  ucmatose's server on ADDR:7471 for ucmConns connections
//	udaddy-client    a UD connection (SIDR) to ADDR:7174, messages both ways
//	udaddy-server    udaddy's server on ADDR:7174
//
// The rdma-core tool is the other guest's. Outside a two-machine run
// (RDMACM_PAIR_PEER unset) there is no peer, and the test says so and
// skips; the same protocols run against the tools in one guest in the
// TestRigInterop* tests.
func TestRigPairPeer(t *testing.T) {
	rigtest.Require(t)
	role := os.Getenv("RDMACM_PAIR_PEER")
	if role == "" {
		t.Skip("not a two-machine step: RDMACM_PAIR_PEER is unset (test/rig/pair.sh --cm sets it)")
	}
	addr, err := netip.ParseAddr(os.Getenv("RDMACM_PAIR_ADDR"))
	if err != nil {
		t.Fatalf("RDMACM_PAIR_ADDR: %v", err)
	}
	// The client retries until the other guest's server listens.
	ctx := rigCtx(t, 300*time.Second)
	switch role {
	case "ucmatose-client":
		var wg sync.WaitGroup
		errs := make(chan error, ucmConns)
		for i := 0; i < ucmConns; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- ucmatoseClient(t, ctx, netip.AddrPortFrom(addr, 7471))
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	case "ucmatose-server":
		ucmatoseServe(t, ctx, netip.AddrPortFrom(addr, 7471), nil)
	case "udaddy-client":
		udaddyDial(t, ctx, netip.AddrPortFrom(addr, 7174))
	case "udaddy-server":
		udaddyServe(t, ctx, netip.AddrPortFrom(addr, 7174), nil)
	default:
		t.Fatalf("RDMACM_PAIR_PEER=%q: not a role", role)
	}
}
