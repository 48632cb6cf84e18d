package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// Config says how Dial and Listen make connections. The zero value (or
// nil) is an RC connection with a 16-entry send and receive queue, one CQ
// with a completion channel, one responder resource and initiator depth,
// retry and RNR retry 7, on a channel of its own.
type Config struct {
	// Channel carries the connection's events; nil opens one that the
	// connection (or listener, and the connections it accepts) shares
	// and closes with its last user.
	Channel *EventChannel
	// PortSpace is PSTCP (RC, the default) or PSUDP (UD).
	PortSpace PortSpace
	// PD is the protection domain of the QP; nil uses the channel's PD on
	// the device the CM chose. A PD must be on that device.
	PD *uverbs.PD
	// Cap is the QP's capacities (zero: 16 WRs each way, 1 SGE each).
	Cap uverbs.QPCap
	// CQEntries is the size of the connection's CQ (zero:
	// MaxSendWR + MaxRecvWR). The QP's send and receive queues share it.
	CQEntries int
	// PollOnly creates the CQ without a completion channel: Conn.CQ can
	// be polled but not waited on (saves an fd and a goroutine per
	// connection).
	PollOnly bool
	// SharedCompChannel makes the CQ report to a completion channel the
	// event channel keeps per device, shared by every connection on the
	// device that asks for it: one descriptor and one event goroutine
	// (parked on the runtime poller) for all of them, where each
	// connection otherwise has its own. CQ.Wait works the same. It is
	// closed with the device (when the event channel closes), never by a
	// connection. Ignored with PollOnly or a caller's PD.
	SharedCompChannel bool
	// WaitSpin and WaitSpinMax are the CQOptions of the connection's own
	// CQ (see uverbs.CQ.Wait): how long a Wait polls before it parks, and
	// how far that may grow following the waits seen.
	WaitSpin, WaitSpinMax time.Duration
	// SendCQ and RecvCQ, when SendCQ is set, are the caller's CQs for the
	// QP (RecvCQ nil: SendCQ), on the device the CM chose, in place of a
	// CQ of the connection's own: Conn.CQ is then nil, and Close leaves
	// them open. CQEntries and PollOnly do not apply.
	SendCQ, RecvCQ *uverbs.CQ
	// SignalAll makes every send complete (sq_sig_all).
	SignalAll bool
	// PrivateData is sent with the connect request (at most 56 bytes on
	// IB/RoCE) or with Listen's accepts (196).
	PrivateData []byte
	// ResponderResources and InitiatorDepth are the RDMA READ and atomic
	// depths offered (0 means 1). Accept takes the minimum of these and
	// the peer's offer.
	ResponderResources, InitiatorDepth uint8
	// RetryCount and RNRRetryCount of the connection (0 means 7).
	RetryCount, RNRRetryCount uint8
	// Source is the local address to resolve from (Dial); zero lets the
	// kernel choose.
	Source netip.AddrPort
	// Setup, if set, is called with the new ID before it resolves or
	// binds: set options there (SetTOS, SetReuseAddr, SetAFOnly, SetAckTimeout).
	Setup func(*ID) error
	// Prepare, if set, is called with the connection's QP in INIT,
	// before the connect or accept: post the receives the peer's first
	// messages need there.
	Prepare func(*Conn) error
	// Backlog is Listen's backlog (0: 1024).
	Backlog int
	// QP, if set, is the caller's QP (in RESET, on the device the CM
	// chooses) to connect instead of one rdmacm creates: Dial and Accept
	// move it to INIT and connect it, and the Conn has no CQ of its own
	// (Conn.CQ is nil); closing the Conn leaves the QP to its owner.
	// Cap, CQEntries, PollOnly, SignalAll and PD are then unused. On a
	// Listener it applies to one Accept only: set it per request with
	// ConnRequest.AcceptQP.
	QP *uverbs.QP
	// ECE is the enhanced connection establishment option this side
	// offers (Linux 5.8 on; librdmacm's rdma_set_local_ece): sent with the
	// connect request (Dial) or with the accept (Listen's accepts). The IB
	// CM carries it (VendorID in the REQ's and REP's 24-bit vendor ID,
	// AttrMod in the MAD header's attribute modifier), so a peer on IB or
	// RoCE reads it in Conn.PeerECE; iWARP's CM carries none (the peer
	// reads zero). VendorID must fit in 24 bits. The zero value offers
	// none.
	ECE ECE
}

// eceMaxVendorID is the largest vendor ID the IB CM's 24-bit field holds.
const eceMaxVendorID = 1<<24 - 1

// eceRequest is e as the kernel takes it, or an error naming verb if the
// vendor ID does not fit the CM's field (the kernel would cut it short).
func eceRequest(verb string, e ECE) (abi.RdmaUcmEce, error) {
	if e.VendorID > eceMaxVendorID {
		return abi.RdmaUcmEce{}, opError(verb, fmt.Errorf("%w: ECE vendor ID %#x does not fit the CM's 24-bit vendor ID field", unix.EINVAL, e.VendorID))
	}
	return abi.RdmaUcmEce{VendorId: e.VendorID, AttrMod: e.AttrMod}, nil
}

func (c *Config) orDefault() Config {
	var d Config
	if c != nil {
		d = *c
	}
	if d.PortSpace == 0 {
		d.PortSpace = PSTCP
	}
	if d.Cap == (uverbs.QPCap{}) {
		d.Cap = uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	}
	if d.CQEntries == 0 {
		d.CQEntries = int(d.Cap.MaxSendWR + d.Cap.MaxRecvWR)
	}
	d.ResponderResources = max(d.ResponderResources, 1)
	d.InitiatorDepth = max(d.InitiatorDepth, 1)
	if d.RetryCount == 0 {
		d.RetryCount = 7
	}
	if d.RNRRetryCount == 0 {
		d.RNRRetryCount = 7
	}
	return d
}

// channel returns the configured channel, or opens one owned by the caller.
func (c *Config) channel() (ch *EventChannel, own bool, err error) {
	if c.Channel != nil {
		return c.Channel, false, nil
	}
	ch, err = Open()
	return ch, true, err
}

// Conn is a connection: its ID, its QP (in RTS once Dial or Accept
// returns) and the CQ the QP's queues share. Its blocked calls return
// ErrDisconnected when the peer disconnects and ErrDeviceRemoved when the
// device goes; NextEvent returns those events.
type Conn struct {
	ID *ID
	QP *uverbs.QP
	CQ *uverbs.CQ
	// PeerData is the private data of the peer's connect request (Accept)
	// or accept (Dial).
	PeerData []byte
	// Param is what the connection agreed (ESTABLISHED or the request).
	Param ConnParam
	// UD is the peer's QPN, QKey and address for a UD connection.
	UD UDParam
	// AH is an address handle for UD: the peer (Dial) or nil.
	AH *uverbs.AH
	// PeerECE is the enhanced connection establishment option the peer
	// offered (librdmacm's rdma_get_remote_ece): in its connect request
	// (Accept) or its accept (Dial); zero if it offered none or its CM
	// carries none (iWARP).
	PeerECE ECE

	comp  *uverbs.CompChannel
	dev   *device // the channel's device this connection holds (nil with a caller's PD)
	ownCh bool
	qpOwn bool // rdmacm created QP (false for Config.QP)

	closeOnce sync.Once
}

// PD is the protection domain of the connection's QP.
func (c *Conn) PD() *uverbs.PD { return c.QP.PD() }

// NextEvent returns the connection's next event that is not a reply:
// DISCONNECTED, DEVICE_REMOVAL, ADDR_CHANGE or TIMEWAIT_EXIT.
func (c *Conn) NextEvent(ctx context.Context) (Event, error) { return c.ID.NextEvent(ctx) }

// Done is closed when the connection is disconnected or its device removed.
func (c *Conn) Done() <-chan struct{} { return c.ID.Done() }

// AfterDone runs f, in a goroutine of its own, once Done is closed (see
// ID.AfterDone).
func (c *Conn) AfterDone(f func()) { c.ID.AfterDone(f) }

// Disconnect disconnects: the QP moves to the error state (its posted
// work requests flush) and both sides get DISCONNECTED.
func (c *Conn) Disconnect() error { return c.ID.Disconnect() }

// Shutdown disconnects gracefully, then closes the connection as Close
// does. Close destroys the ID right after its DISCONNECT, which cancels the
// kernel's retransmission of the DREQ (IB, RoCE): a lost DREQ then leaves
// the peer connected until it notices otherwise. Shutdown sends the DREQ
// (unless the connection is already down) and waits until the CM reports
// the connection down — the peer's DREP arrived, the DREQ's retries ran
// out, or the peer disconnected first (Done is closed) — before it
// destroys anything. If ctx ends first, Shutdown closes anyway and returns
// an *OpError wrapping ctx's error. On iWARP the DISCONNECTED event comes
// once the peer has closed its side of the stream.
func (c *Conn) Shutdown(ctx context.Context) error {
	var werr error
	if c.ID.Err() == nil && c.QP != nil && c.ID.Disconnect() == nil {
		select {
		case <-c.ID.Done():
		case <-c.ID.closed(): // another goroutine's Close
		case <-ctx.Done():
			werr = opError("Shutdown", ctx.Err())
		}
	}
	return errors.Join(werr, c.Close())
}

// Close disconnects (unless the connection is already down), destroys the
// QP, CQ and ID, and closes the channel if the connection owns it. It is
// idempotent; blocked calls return an error matching ErrClosed. Shutdown
// is the graceful way.
func (c *Conn) Close() error {
	var err error
	c.closeOnce.Do(func() { err = c.close() })
	return err
}

func (c *Conn) close() error {
	var errs []error
	if c.ID.Err() == nil && c.QP != nil {
		_ = c.ID.Disconnect() // may fail: never connected, or already down
	}
	c.ID.mu.Lock()
	c.ID.qp = nil
	c.ID.mu.Unlock()
	if c.AH != nil {
		errs = append(errs, c.AH.Close())
	}
	if c.QP != nil && c.qpOwn {
		errs = append(errs, c.QP.Close())
	}
	if c.CQ != nil {
		errs = append(errs, c.CQ.Close())
	}
	if c.comp != nil {
		errs = append(errs, c.comp.Close())
	}
	errs = append(errs, c.ID.Close())
	if c.dev != nil {
		errs = append(errs, c.ID.ch.doneDevice(c.dev))
	}
	if c.ownCh {
		errs = append(errs, c.ID.ch.release())
	}
	return errors.Join(errs...)
}

// sharesComp reports whether a connection made with c has its CQ report to
// the device's shared completion channel (SharedCompChannel): c makes the
// CQ (no QP or CQs of the caller's) and waits on it (not PollOnly).
func (c *Config) sharesComp() bool {
	return c.SharedCompChannel && !c.PollOnly && c.QP == nil && c.SendCQ == nil
}

// newConn creates the QP of a connection on id's device and moves it to
// INIT, then runs cfg.Prepare.
func newConn(id *ID, cfg *Config) (*Conn, error) {
	if cfg.QP != nil {
		return adoptQP(id, cfg)
	}
	c := &Conn{ID: id, qpOwn: true}
	pd := cfg.PD
	if pd == nil && id.dev != nil {
		pd = id.PD()
		c.dev = id.dev
		id.ch.useDevice(c.dev)
	}
	if pd == nil {
		return nil, opError("CreateQP", errors.New("the ID has no device yet"))
	}
	ctx := pd.Context()
	fail := func(err error) (*Conn, error) {
		id.mu.Lock()
		id.qp = nil
		id.mu.Unlock()
		if c.QP != nil {
			c.QP.Close()
		}
		if c.CQ != nil {
			c.CQ.Close()
		}
		if c.comp != nil {
			c.comp.Close()
		}
		if c.dev != nil {
			id.ch.doneDevice(c.dev)
		}
		return nil, err
	}
	sendCQ, recvCQ := cfg.SendCQ, cfg.RecvCQ
	if sendCQ == nil {
		opt := uverbs.CQOptions{WaitSpin: cfg.WaitSpin, WaitSpinMax: cfg.WaitSpinMax}
		if cfg.sharesComp() && c.dev != nil {
			ch, err := c.dev.sharedComp()
			if err != nil {
				return fail(opError("CreateQP", err))
			}
			opt.Channel = ch
		} else if !cfg.PollOnly {
			ch, err := ctx.CreateCompChannel()
			if err != nil {
				return fail(opError("CreateQP", err))
			}
			c.comp, opt.Channel = ch, ch
		}
		cq, err := ctx.CreateCQ(cfg.CQEntries, opt)
		if err != nil {
			return fail(opError("CreateQP", err))
		}
		c.CQ, sendCQ, recvCQ = cq, cq, cq
	} else if recvCQ == nil {
		recvCQ = sendCQ
	}
	qp, err := pd.CreateQP(uverbs.QPInit{Type: id.qpType, SendCQ: sendCQ, RecvCQ: recvCQ, Cap: cfg.Cap, SignalAll: cfg.SignalAll})
	if err != nil {
		return fail(opError("CreateQP", err))
	}
	c.QP = qp
	id.mu.Lock()
	id.qp = qp
	id.mu.Unlock()
	if err := id.ModifyQP(qp, uverbs.QPStateInit); err != nil {
		return fail(err)
	}
	if cfg.Prepare != nil {
		if err := cfg.Prepare(c); err != nil {
			return fail(opError("Prepare", err))
		}
	}
	return c, nil
}

// adoptQP is newConn for the caller's QP (Config.QP): INIT, then
// cfg.Prepare.
func adoptQP(id *ID, cfg *Config) (*Conn, error) {
	c := &Conn{ID: id, QP: cfg.QP}
	fail := func(err error) (*Conn, error) {
		id.mu.Lock()
		id.qp = nil
		id.mu.Unlock()
		return nil, err
	}
	id.mu.Lock()
	id.qp = cfg.QP
	id.mu.Unlock()
	if err := id.ModifyQP(cfg.QP, uverbs.QPStateInit); err != nil {
		return fail(err)
	}
	if cfg.Prepare != nil {
		if err := cfg.Prepare(c); err != nil {
			return fail(opError("Prepare", err))
		}
	}
	return c, nil
}

// toRTS moves an IB/RoCE QP through RTR to RTS with the CM's attributes;
// a UD QP gets RTR with its state only and RTS with SQ PSN 0.
func (id *ID) toRTS(qp *uverbs.QP) error { return id.toRTSWith(qp, nil) }

// toRTSWith is toRTS with the READ depths of depths (when not nil) in
// place of the CM's: Accept's QP serves and issues what the reply says,
// as librdmacm's rdma_accept sets them, not the dialer's offer.
func (id *ID) toRTSWith(qp *uverbs.QP, depths *Config) error {
	if id.qpType == uverbs.QPTypeUD {
		a := uverbs.QPAttr{State: uverbs.QPStateRTR}
		if err := qp.Modify(&a, uverbs.QPAttrState); err != nil {
			return opError("ModifyQP(RTR)", err)
		}
		a = uverbs.QPAttr{State: uverbs.QPStateRTS}
		if err := qp.Modify(&a, uverbs.QPAttrState|uverbs.QPAttrSQPSN); err != nil {
			return opError("ModifyQP(RTS)", err)
		}
		return nil
	}
	if err := id.modifyQP(qp, uverbs.QPStateRTR, depths); err != nil {
		return err
	}
	return id.modifyQP(qp, uverbs.QPStateRTS, depths)
}

func putConnParam(p *abi.RdmaUcmConnParam, qpn uint32, data []byte, cfg *Config) error {
	if len(data) > len(p.PrivateData) {
		return fmt.Errorf("%d bytes of private data, at most %d", len(data), len(p.PrivateData))
	}
	p.QpNum = qpn
	copy(p.PrivateData[:], data)
	p.PrivateDataLen = uint8(len(data))
	p.ResponderResources = cfg.ResponderResources
	p.InitiatorDepth = cfg.InitiatorDepth
	p.RetryCount = cfg.RetryCount
	p.RnrRetryCount = cfg.RNRRetryCount
	p.Valid = 1
	return nil
}

// Dial connects to dst: it creates an ID, resolves the address and route,
// creates the QP on the device the CM chose, and connects with
// cfg.PrivateData, returning when the connection is ESTABLISHED (the QP
// in RTS). ctx bounds the whole set-up; on error everything made is
// destroyed. A REJECTED answer is an error for which Rejected returns the
// peer's reason and private data.
func Dial(ctx context.Context, dst netip.AddrPort, cfg *Config) (*Conn, error) {
	c := cfg.orDefault()
	ch, own, err := c.channel()
	if err != nil {
		return nil, err
	}
	id, err := ch.CreateID(c.PortSpace)
	if err != nil {
		if own {
			ch.Close()
		}
		return nil, err
	}
	conn, err := id.dial(ctx, dst, &c)
	if err != nil {
		id.Close()
		if own {
			ch.Close()
		}
		return nil, err
	}
	if own {
		ch.acquire()
		conn.ownCh = true
	}
	return conn, nil
}

// dial is Dial on an existing ID.
func (id *ID) dial(ctx context.Context, dst netip.AddrPort, c *Config) (*Conn, error) {
	if c.Setup != nil {
		if err := c.Setup(id); err != nil {
			return nil, opError("Setup", err)
		}
	}
	if err := id.ResolveAddr(ctx, c.Source, dst); err != nil {
		return nil, err
	}
	if err := id.ResolveRoute(ctx); err != nil {
		return nil, err
	}
	conn, err := newConn(id, c)
	if err != nil {
		return nil, err
	}
	if err := id.connect(ctx, conn, c); err != nil {
		conn.Close() //nolint:errcheck // the connect error is the one to report
		return nil, err
	}
	return conn, nil
}

// connect sends CONNECT and waits for the connection to be established.
func (id *ID) connect(ctx context.Context, conn *Conn, c *Config) error {
	var req abi.RdmaUcmConnect
	req.Id = id.kid
	if err := putConnParam(&req.ConnParam, conn.QP.QPN(), c.PrivateData, c); err != nil {
		return opError("Connect", err)
	}
	ece, err := eceRequest("Connect", c.ECE)
	if err != nil {
		return err
	}
	req.Ece = ece
	if id.qpType == uverbs.QPTypeUD {
		a, _, err := id.InitQPAttr(uverbs.QPStateInit)
		if err != nil {
			return err
		}
		req.ConnParam.Qkey = a.QKey
		if err := id.toRTS(conn.QP); err != nil {
			return err
		}
	}
	if err := id.write("Connect", abi.RDMA_USER_CM_CMD_CONNECT, abi.Bytes(&req), nil); err != nil {
		return err
	}
	if id.iWARP() || id.qpType == uverbs.QPTypeUD {
		ev, err := id.wait(ctx, "Connect", true, EventEstablished)
		if err != nil {
			return err
		}
		conn.PeerData, conn.Param, conn.UD, conn.PeerECE = ev.PrivateData, ev.Conn, ev.UD, ev.ECE
		if id.qpType == uverbs.QPTypeUD {
			ah, err := conn.QP.PD().CreateAH(ev.UD.AH)
			if err != nil {
				return opError("Connect", err)
			}
			conn.AH = ah
		}
		return nil
	}
	ev, err := id.wait(ctx, "Connect", true, EventConnectResponse)
	if err != nil {
		return err
	}
	conn.PeerData, conn.Param, conn.PeerECE = ev.PrivateData, ev.Conn, ev.ECE
	// Before the connect the CM had no IB CM id, and INIT_QP_ATTR(INIT)
	// gave no remote access (cma_ib_init_qp_attr): INIT again, now with
	// REMOTE_WRITE and, with responder resources, REMOTE_READ and ATOMIC
	// (librdmacm's ucma_modify_qp_rtr does the same).
	if err := id.ModifyQP(conn.QP, uverbs.QPStateInit); err != nil {
		id.reject()
		return err
	}
	if err := id.toRTS(conn.QP); err != nil {
		id.reject()
		return err
	}
	// ACCEPT without parameters on the active side sends the RTU.
	acc := abi.RdmaUcmAccept{Id: id.kid}
	return id.write("Connect", abi.RDMA_USER_CM_CMD_ACCEPT, abi.Bytes(&acc), nil)
}

func (id *ID) reject() {
	req := abi.RdmaUcmReject{Id: id.kid}
	_ = id.write("Reject", abi.RDMA_USER_CM_CMD_REJECT, abi.Bytes(&req), nil)
}
