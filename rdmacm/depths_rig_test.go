package rdmacm_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// TestRigReadDepths checks the RDMA READ depths Accept agrees on RoCE.
// The kernel hands a CONNECT_REQUEST over from the acceptor's side:
// cm_format_req_event (drivers/infiniband/core/cm.c) reports the REQ's
// initiator depth as the event's responder resources and the other way
// round, and librdmacm's rdma_accept takes the event so. The acceptor must
// serve as many READs as the dialer may have outstanding (its
// ResponderResources is at most the dialer's InitiatorDepth) and issue no
// more than the dialer serves.
func TestRigReadDepths(t *testing.T) {
	rigtest.Require(t)
	// Powers of two: rxe rounds the depths up to one (rxe_qp_from_attr).
	const cliRR, cliID = 2, 4
	for _, c := range []struct {
		name         string
		srvRR, srvID uint8
		dest, init   uint8 // the acceptor's max_dest_rd_atomic and max_rd_atomic
	}{
		{"acceptor-offers-more", 8, 8, cliID, cliRR},
		{"acceptor-offers-less", 1, 1, 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := rigCtx(t, 60*time.Second)
			client, server, req := pairWith(t, ctx, netip.Addr{}, addrRXE0,
				&rdmacm.Config{ResponderResources: c.srvRR, InitiatorDepth: c.srvID},
				&rdmacm.Config{ResponderResources: cliRR, InitiatorDepth: cliID})
			if req.ResponderResources != cliID || req.InitiatorDepth != cliRR {
				t.Errorf("CONNECT_REQUEST: responder resources %d, initiator depth %d; want the dialer's %d and %d swapped",
					req.ResponderResources, req.InitiatorDepth, cliID, cliRR)
			}
			// The dialer's QP takes what the reply said, crossed back.
			for _, q := range []struct {
				side       string
				qp         *uverbs.QP
				dest, init uint8
			}{
				{"acceptor", server.QP, c.dest, c.init},
				{"dialer", client.QP, c.init, c.dest},
			} {
				a, _, err := q.qp.Query(uverbs.QPAttrMaxQPRDAtomic | uverbs.QPAttrMaxDestRDAtomic)
				if err != nil {
					t.Fatal(err)
				}
				if a.MaxDestRDAtomic != q.dest || a.MaxRDAtomic != q.init {
					t.Errorf("%s's QP: max_dest_rd_atomic %d, max_rd_atomic %d; want %d and %d",
						q.side, a.MaxDestRDAtomic, a.MaxRDAtomic, q.dest, q.init)
				}
			}
		})
	}
}
