package rdmacm

import (
	"context"
	"errors"
	"net/netip"
	"sync/atomic"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/uverbs"
)

// Multicast is a multicast group an ID joined (JOIN_MCAST).
type Multicast struct {
	id   *ID
	uid  uint64
	kid  uint32 // the kernel's multicast id
	addr netip.AddrPort
	evs  chan Event
	UD   UDParam // from MULTICAST_JOIN: QPN 0xffffff, QKey, the group's address
	left atomic.Bool
	qp   *uverbs.QP // attached by JoinGroup
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
	req.Uid, req.Id = uid, id.kid
	req.AddrSize = uint16(putSockaddr(abi.Bytes(&req.Addr), addr, addr.Addr().Is6()))
	if sendOnly {
		req.JoinFlags = abi.RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER
	}
	if err := id.call("JoinMulticast", abi.RDMA_USER_CM_CMD_JOIN_MCAST, abi.Bytes(&req), respAtJoinMcast, abi.Bytes(&resp)); err != nil {
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
	case <-id.closed():
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
	if !m.left.CompareAndSwap(false, true) {
		return nil
	}
	var err error
	if m.qp != nil && m.UD.AH.GRH != nil {
		err = m.qp.DetachMulticast(m.UD.AH.GRH.DGID, m.UD.AH.DLID)
	}
	m.id.mu.Lock()
	delete(m.id.mcasts, m.uid)
	m.id.mu.Unlock()
	m.id.ch.unregister(m.uid)
	req := abi.RdmaUcmDestroyId{Id: m.kid}
	var resp abi.RdmaUcmDestroyIdResp
	// After the ID's Close, ErrClosed: DESTROY_ID left the group.
	e := m.id.call("LeaveMulticast", abi.RDMA_USER_CM_CMD_LEAVE_MCAST, abi.Bytes(&req), respAtDestroyID, abi.Bytes(&resp))
	if err == nil && !errors.Is(e, ErrClosed) {
		err = e
	}
	return err
}

// JoinGroup creates a UD ID, resolves the multicast address group from
// cfg.Source (which picks the device), creates and readies a UD QP (as
// Dial does; cfg.Prepare can post receives), joins the group
// (sendOnly: as a send-only full member), attaches the QP to it, and
// returns the connection, whose UD and AH address the group, and the
// membership. Leave the group (which detaches the QP) before closing the
// connection.
func JoinGroup(ctx context.Context, group netip.AddrPort, sendOnly bool, cfg *Config) (*Conn, *Multicast, error) {
	c := cfg.orDefault()
	c.PortSpace = PSUDP
	ch, own, err := c.channel()
	if err != nil {
		return nil, nil, err
	}
	id, err := ch.CreateID(PSUDP)
	if err != nil {
		if own {
			ch.Close()
		}
		return nil, nil, err
	}
	conn, m, err := id.joinGroup(ctx, group, sendOnly, &c)
	if err != nil {
		if conn != nil {
			conn.Close()
		}
		id.Close()
		if own {
			ch.Close()
		}
		return nil, nil, err
	}
	if own {
		ch.acquire()
		conn.ownCh = true
	}
	return conn, m, nil
}

func (id *ID) joinGroup(ctx context.Context, group netip.AddrPort, sendOnly bool, c *Config) (*Conn, *Multicast, error) {
	if c.Setup != nil {
		if err := c.Setup(id); err != nil {
			return nil, nil, opError("Setup", err)
		}
	}
	if err := id.ResolveAddr(ctx, c.Source, group); err != nil {
		return nil, nil, err
	}
	conn, err := newConn(id, c)
	if err != nil {
		return nil, nil, err
	}
	if err := id.toRTS(conn.QP); err != nil {
		return conn, nil, err
	}
	m, err := id.JoinMulticast(ctx, group, sendOnly)
	if err != nil {
		return conn, nil, err
	}
	conn.UD = m.UD
	if conn.AH, err = conn.QP.PD().CreateAH(m.UD.AH); err != nil {
		m.Leave()
		return conn, nil, opError("JoinMulticast", err)
	}
	if !sendOnly {
		if m.UD.AH.GRH == nil {
			m.Leave()
			return conn, nil, opError("JoinMulticast", errors.New("the group's address has no GID"))
		}
		if err := conn.QP.AttachMulticast(m.UD.AH.GRH.DGID, m.UD.AH.DLID); err != nil {
			m.Leave()
			return conn, nil, opError("JoinMulticast", err)
		}
		m.qp = conn.QP
	}
	return conn, m, nil
}
