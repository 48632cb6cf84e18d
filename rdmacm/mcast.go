package rdmacm

import (
	"context"
	"net/netip"

	"github.com/goverbs/goverbs/abi"
)

// Multicast is a multicast group an ID joined (JOIN_MCAST).
type Multicast struct {
	id   *ID
	uid  uint64
	kid  uint32 // the kernel's multicast id
	addr netip.AddrPort
	evs  chan Event
	UD   UDParam // from MULTICAST_JOIN: QPN 0xffffff, QKey, the group's address
	left bool
}

func (m *Multicast) deliver(ev Event) {
	select {
	case m.evs <- ev:
	default: // a join has one answer; later errors are dropped if nobody reads
	}
}
func (m *Multicast) udEvents() bool { return true }
func (m *Multicast) stop(error)     {}

// JoinMulticast joins the multicast group addr (a UD ID after
// ResolveAddr, JOIN_MCAST) and waits for MULTICAST_JOIN. sendOnly joins as
// a send-only full member. Attach the QP to the group
// (uverbs.QP.AttachMulticast with UD.AH.GRH.DGID and UD.AH.DLID) to
// receive.
func (id *ID) JoinMulticast(ctx context.Context, addr netip.AddrPort, sendOnly bool) (*Multicast, error) {
	m := &Multicast{id: id, addr: addr, evs: make(chan Event, 1)}
	uid, err := id.ch.register(m)
	if err != nil {
		return nil, opError("JoinMulticast", err)
	}
	m.uid = uid
	var req abi.RdmaUcmJoinMcast
	var resp abi.RdmaUcmCreateIdResp
	out := abi.Bytes(&resp)
	req.Response, req.Uid, req.Id = addrOf(out), uid, id.kid
	req.AddrSize = uint16(putSockaddr(abi.Bytes(&req.Addr), addr, addr.Addr().Is6()))
	if sendOnly {
		req.JoinFlags = abi.RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER
	}
	if err := id.ch.write("JoinMulticast", abi.RDMA_USER_CM_CMD_JOIN_MCAST, abi.Bytes(&req), out); err != nil {
		id.ch.unregister(uid)
		return nil, err
	}
	m.kid = resp.Id
	id.mu.Lock()
	if id.mcasts == nil {
		id.mcasts = map[uint64]*Multicast{}
	}
	id.mcasts[uid] = m
	id.mu.Unlock()
	select {
	case ev := <-m.evs:
		if ev.Type != EventMulticastJoin {
			m.Leave()
			return nil, opError("JoinMulticast", &EventError{Event: ev})
		}
		m.UD = ev.UD
		return m, nil
	case <-id.closedCh:
		return nil, opError("JoinMulticast", ErrClosed)
	case <-ctx.Done():
		m.Leave()
		return nil, opError("JoinMulticast", ctx.Err())
	}
}

// Addr is the group's address.
func (m *Multicast) Addr() netip.AddrPort { return m.addr }

// Leave leaves the group (LEAVE_MCAST). Detach the QP first. Idempotent.
func (m *Multicast) Leave() error {
	if m.left {
		return nil
	}
	m.left = true
	m.id.mu.Lock()
	delete(m.id.mcasts, m.uid)
	m.id.mu.Unlock()
	m.id.ch.unregister(m.uid)
	req := abi.RdmaUcmDestroyId{Id: m.kid}
	resp := make([]byte, 4)
	req.Response = addrOf(resp)
	return m.id.ch.write("LeaveMulticast", abi.RDMA_USER_CM_CMD_LEAVE_MCAST, abi.Bytes(&req), resp)
}
