package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/uverbs"
)

// Listener listens for connection requests on an address.
type Listener struct {
	ID    *ID
	cfg   Config
	ownCh bool
}

// Listen binds to addr (a zero port picks one, an unspecified address
// listens on every RDMA device) and listens. Accepted connections are
// made with cfg. A listener on one device's address has that device open
// from the start (Bind), and with cfg.SharedCompChannel its completion
// channel made, so that answering the first request opens neither.
func Listen(addr netip.AddrPort, cfg *Config) (*Listener, error) {
	c := cfg.orDefault()
	ch, own, err := c.channel()
	if err != nil {
		return nil, err
	}
	fail := func(id *ID, err error) (*Listener, error) {
		if id != nil {
			id.Close()
		}
		if own {
			ch.Close()
		}
		return nil, err
	}
	id, err := ch.CreateID(c.PortSpace)
	if err != nil {
		return fail(nil, err)
	}
	if c.Setup != nil {
		if err := c.Setup(id); err != nil {
			return fail(id, opError("Setup", err))
		}
	}
	if err := id.Bind(addr); err != nil {
		return fail(id, err)
	}
	if err := id.Listen(c.Backlog); err != nil {
		return fail(id, err)
	}
	// Bound to one device's address, the listener has the device open
	// (Bind). Its connections' shared completion channel is made now too,
	// so that answering a request makes none of the ordinary system calls
	// that creating it takes (each wakes Go's runtime monitor from its
	// deep sleep just as the connection's first messages come).
	if id.dev != nil && c.sharesComp() {
		if _, err := id.dev.sharedComp(); err != nil {
			return fail(id, opError("Listen", err))
		}
	}
	if own {
		ch.acquire()
	}
	return &Listener{ID: id, cfg: c, ownCh: own}, nil
}

// Addr is the address the listener is bound to.
func (l *Listener) Addr() netip.AddrPort {
	a, _ := l.ID.LocalAddr()
	return a
}

// Accept returns the next connection request, waiting until one comes,
// ctx is done or the listener is closed. Accept or reject every request:
// one left unanswered holds its kernel ID until the listener closes.
func (l *Listener) Accept(ctx context.Context) (*ConnRequest, error) {
	r, err := l.ID.NextRequest(ctx)
	if err != nil {
		return nil, err
	}
	r.cfg = &l.cfg
	r.ownCh = l.ownCh
	return r, nil
}

// Close stops listening and destroys the ID; pending requests are
// rejected. Connections accepted from it stay up; the channel they share
// closes with the last of them. Idempotent.
func (l *Listener) Close() error {
	err := l.ID.Close()
	if l.ownCh {
		l.ownCh = false
		if e := l.ID.ch.release(); err == nil {
			err = e
		}
	}
	return err
}

// ConnRequest is a connection request (CONNECT_REQUEST): accept it with
// Accept or refuse it with Reject.
type ConnRequest struct {
	// ID is the new connection's ID.
	ID *ID
	// Event is the request: the peer's PrivateData and its offered Conn
	// parameters (or UD ones).
	Event    Event
	listener *ID
	cfg      *Config
	ownCh    bool // accepted connections share the listener's own channel
	done     bool
}

// PrivateData is the private data of the request (IB CMs pad it to 56 bytes).
func (r *ConnRequest) PrivateData() []byte { return r.Event.PrivateData }

// Accept creates the QP on the device the request came in on, moves it to
// RTS (INIT only on iWARP: the CM moves it) and accepts with privateData,
// returning when the connection is ESTABLISHED (RC) or the reply is sent
// (UD).
func (r *ConnRequest) Accept(ctx context.Context, privateData []byte) (*Conn, error) {
	return r.AcceptWith(ctx, privateData, nil)
}

// AcceptConfig is Accept with cfg in place of the listener's Config (its
// Channel, Setup and Backlog do not apply): for a QP on the caller's PD and
// CQs, made once the request says which device it came in on.
func (r *ConnRequest) AcceptConfig(ctx context.Context, privateData []byte, cfg *Config) (*Conn, error) {
	r.cfg = cfg
	return r.AcceptWith(ctx, privateData, nil)
}

// AcceptWith is Accept with prepare in place of the listener's
// Config.Prepare (when not nil): a per-connection hook that posts the
// first receives into buffers of the connection's own.
func (r *ConnRequest) AcceptWith(ctx context.Context, privateData []byte, prepare func(*Conn) error) (*Conn, error) {
	return r.accept(ctx, privateData, prepare, nil)
}

// AcceptQP is Accept with the caller's QP (see Config.QP).
func (r *ConnRequest) AcceptQP(ctx context.Context, privateData []byte, qp *uverbs.QP) (*Conn, error) {
	if qp == nil {
		return nil, opError("Accept", errors.New("nil QP"))
	}
	return r.accept(ctx, privateData, nil, qp)
}

func (r *ConnRequest) accept(ctx context.Context, privateData []byte, prepare func(*Conn) error, qp *uverbs.QP) (*Conn, error) {
	if r.done {
		return nil, opError("Accept", errors.New("request already answered"))
	}
	r.done = true
	cfg := Config{}
	if r.cfg != nil {
		cfg = *r.cfg
	}
	cfg = cfg.orDefault()
	if prepare != nil {
		cfg.Prepare = prepare
	}
	cfg.QP = qp
	id := r.ID
	ch := id.ch
	fail := func(err error) (*Conn, error) {
		id.reject()
		id.Close()
		return nil, err
	}
	if err := id.bindDevice("Accept"); err != nil {
		return fail(err)
	}
	conn, err := newConn(id, &cfg)
	if err != nil {
		return fail(err)
	}
	failConn := func(err error) (*Conn, error) {
		id.reject()
		conn.Close() //nolint:errcheck // the accept error is the one to report
		return nil, err
	}
	conn.PeerData, conn.Param, conn.UD, conn.PeerECE = r.Event.PrivateData, r.Event.Conn, r.Event.UD, r.Event.ECE
	// The request comes from our side already (the IB CM's
	// cm_format_req_event and iw_cm's connect request say what we are to
	// serve as responder resources and may issue as initiator depth): we
	// serve no more READs than the dialer may have outstanding and issue no
	// more than it serves (librdmacm's rdma_accept agrees the same).
	p := cfg
	p.ResponderResources = min(cfg.ResponderResources, r.Event.Conn.ResponderResources)
	p.InitiatorDepth = min(cfg.InitiatorDepth, r.Event.Conn.InitiatorDepth)
	if !id.iWARP() {
		if err := id.toRTSWith(conn.QP, &p); err != nil {
			return failConn(err)
		}
	}
	uid, err := ch.register(id)
	if err != nil {
		return failConn(opError("Accept", err))
	}
	id.uid = uid
	if r.ownCh && ch == r.listener.ch { // not if Migrate moved the ID
		conn.ownCh = true
		ch.acquire()
	}
	var req abi.RdmaUcmAccept
	req.Uid, req.Id = uid, id.kid
	if err := putConnParam(&req.ConnParam, conn.QP.QPN(), privateData, &p); err != nil {
		return failConn(opError("Accept", err))
	}
	if req.Ece, err = eceRequest("Accept", cfg.ECE); err != nil {
		return failConn(err)
	}
	if id.qpType == uverbs.QPTypeUD {
		a, _, err := id.InitQPAttr(uverbs.QPStateInit)
		if err != nil {
			return failConn(err)
		}
		req.ConnParam.Qkey = a.QKey
	}
	if err := id.write("Accept", abi.RDMA_USER_CM_CMD_ACCEPT, abi.Bytes(&req), nil); err != nil {
		return failConn(err)
	}
	if id.qpType == uverbs.QPTypeUD {
		return conn, nil
	}
	ev, err := id.wait(ctx, "Accept", true, EventEstablished)
	if err != nil {
		return failConn(err)
	}
	conn.Param = ev.Conn
	return conn, nil
}

// Reject refuses the request with privateData (the IB CM's consumer reject
// reason; the peer's Dial fails with a REJECTED event carrying both) and
// destroys its ID.
func (r *ConnRequest) Reject(privateData []byte) error {
	return r.reject("Reject", privateData, 0)
}

// RejectReasonVendorOptionNotSupported is the IB CM's reject reason
// IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED (35): what RejectECE sends, and
// Event.Reason on the peer that was refused.
const RejectReasonVendorOptionNotSupported = 35

// RejectECE refuses the request because its enhanced connection
// establishment option (Event.ECE) is not one this side takes
// (librdmacm's rdma_reject_ece): the IB CM's reject reason
// RejectReasonVendorOptionNotSupported in place of the consumer's reject,
// with privateData; the peer's Dial fails with a REJECTED event of that
// Reason. iWARP's CM sends no reason (the peer sees a plain reject).
func (r *ConnRequest) RejectECE(privateData []byte) error {
	return r.reject("RejectECE", privateData, RejectReasonVendorOptionNotSupported)
}

// reject is Reject with the IB CM reason (0: the kernel's
// IB_CM_REJ_CONSUMER_DEFINED).
func (r *ConnRequest) reject(verb string, privateData []byte, reason uint8) error {
	if r.done {
		return opError(verb, errors.New("request already answered"))
	}
	r.done = true
	var req abi.RdmaUcmReject
	req.Id, req.Reason = r.ID.kid, reason
	if len(privateData) > len(req.PrivateData) {
		return opError(verb, fmt.Errorf("%d bytes of private data, at most %d", len(privateData), len(req.PrivateData)))
	}
	copy(req.PrivateData[:], privateData)
	req.PrivateDataLen = uint8(len(privateData))
	err := r.ID.write(verb, abi.RDMA_USER_CM_CMD_REJECT, abi.Bytes(&req), nil)
	if e := r.ID.Close(); err == nil {
		err = e
	}
	return err
}
