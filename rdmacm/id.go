package rdmacm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/uverbs"
)

// PortSpace is an rdma_cm port space (enum rdma_ucm_port_space).
type PortSpace uint16

// Port spaces.
const (
	PSTCP PortSpace = abi.RDMA_PS_TCP // reliable connected QPs (RC)
	PSUDP PortSpace = abi.RDMA_PS_UDP // unreliable datagram QPs (UD), multicast
	PSIB  PortSpace = abi.RDMA_PS_IB  // any QP type, native IB addressing
)

// ID is an rdma_cm identifier (struct rdma_cm_id): an endpoint that is
// bound, resolves addresses and routes, listens, connects or joins
// multicast groups. Its operations are made one at a time (a second
// blocking call while one is waiting is a programming error); Close,
// Disconnect and NextEvent may be called from any goroutine at any time.
type ID struct {
	ch     *EventChannel
	kid    uint32 // the kernel's id
	uid    uint64
	ps     PortSpace
	qpType uverbs.QPType

	// The four channels are made under mu by the first goroutine that
	// waits on one (an ID created and closed with no wait in between, as
	// a listener's refused requests are, costs one allocation, not five);
	// until then a nil sig or asig is poked by no one, and a nil brokenCh
	// or closedCh whose event has happened becomes closedChan.
	mu       sync.Mutex
	replies  []Event
	async    []Event
	requests []*ConnRequest // a listener's connection requests
	mcasts   map[uint64]*Multicast
	sig      chan struct{} // cap 1: replies or requests changed
	asig     chan struct{} // cap 1: async changed
	broken   error         // DISCONNECTED or DEVICE_REMOVAL seen
	brokenCh chan struct{} // closed when broken is set
	onBreak  []func()      // AfterDone's functions, run when brokenCh closes
	closeErr error         // ErrClosed (or the channel's error) once closed
	closedCh chan struct{} // closed when closeErr is set
	closing  sync.Once

	// kmu orders the commands that name kid before Close's DESTROY_ID
	// (write); destroyed refuses them after it.
	kmu       sync.RWMutex
	destroyed bool

	dev  *device
	port uint8
	qp   *uverbs.QP // the QP the CM moves (iWARP, and for Disconnect)

	formerChs []*EventChannel // channels the ID was migrated from (they keep its uid until Close)
}

// CreateID creates an ID on the channel for port space ps (RDMA_PS_TCP
// with RC, RDMA_PS_UDP with UD).
func (ch *EventChannel) CreateID(ps PortSpace) (*ID, error) {
	qpt := uverbs.QPTypeRC
	if ps == PSUDP {
		qpt = uverbs.QPTypeUD
	}
	id := newID(ch, ps, qpt)
	uid, err := ch.register(id)
	if err != nil {
		return nil, opError("CreateID", err)
	}
	id.uid = uid
	req := abi.RdmaUcmCreateId{Uid: uid, Ps: uint16(ps), QpType: uint8(qpt)}
	var resp abi.RdmaUcmCreateIdResp
	if err := ch.call("CreateID", abi.RDMA_USER_CM_CMD_CREATE_ID, abi.Bytes(&req), respAtCreateID, abi.Bytes(&resp)); err != nil {
		ch.unregister(uid)
		return nil, err
	}
	id.kid = resp.Id
	return id, nil
}

func newID(ch *EventChannel, ps PortSpace, qpt uverbs.QPType) *ID {
	return &ID{ch: ch, ps: ps, qpType: qpt}
}

// closedChan stands for a brokenCh or closedCh nobody had asked for when
// its event happened.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// signal returns *c, made with a buffer of one if it is nil (sig, asig).
// id.mu must be held.
func signal(c *chan struct{}) chan struct{} {
	if *c == nil {
		*c = make(chan struct{}, 1)
	}
	return *c
}

// latch returns *c, made if it is nil (brokenCh, closedCh); id.mu must be
// held.
func latch(c *chan struct{}) chan struct{} {
	if *c == nil {
		*c = make(chan struct{})
	}
	return *c
}

// fire closes *c, or makes it closedChan if nobody asked for it yet;
// id.mu must be held.
func fire(c *chan struct{}) {
	if *c == nil {
		*c = closedChan
		return
	}
	close(*c)
}

// closed returns the channel closed when the ID is closed.
func (id *ID) closed() <-chan struct{} {
	id.mu.Lock()
	defer id.mu.Unlock()
	return latch(&id.closedCh)
}

func (id *ID) udEvents() bool { return id.qpType == uverbs.QPTypeUD }

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (id *ID) deliver(ev Event) {
	id.mu.Lock()
	switch {
	case ev.Type == EventConnectRequest:
		child := newID(id.ch, id.ps, id.qpType)
		child.kid = ev.id
		id.requests = append(id.requests, &ConnRequest{ID: child, Event: ev, listener: id})
		sig := id.sig
		id.mu.Unlock()
		poke(sig)
		return
	case ev.Type.async():
		breaks := id.broken == nil && (ev.Type == EventDisconnected || ev.Type == EventDeviceRemoval)
		qp := id.qp
		id.mu.Unlock()
		if breaks {
			// Before anyone can see the event (NextEvent, Done, Err): the
			// QP is in ERR, so its posted work requests complete with
			// flush errors and QP.State says so, and on DEVICE_REMOVAL the
			// uverbs contexts wake their waiters (CQ.Wait, NextAsyncEvent):
			// the kernel deletes the uverbs device node only after every
			// CM ID on the device is destroyed, so they cannot see it yet.
			id.flush(qp)
			if ev.Type == EventDeviceRemoval {
				if qp != nil {
					qp.PD().Context().DeviceRemoved()
				}
				if id.dev != nil && id.dev.ctx != nil {
					id.dev.ctx.DeviceRemoved()
				}
			}
		}
		id.mu.Lock()
		id.async = append(id.async, ev)
		if breaks {
			id.broken = ErrDisconnected
			if ev.Type == EventDeviceRemoval {
				id.broken = ErrDeviceRemoved
			}
			fire(&id.brokenCh)
		}
		var fs []func()
		if breaks {
			fs, id.onBreak = id.onBreak, nil
		}
		asig := id.asig
		id.mu.Unlock()
		for _, f := range fs {
			go f()
		}
		poke(asig)
		if ev.Type == EventDeviceRemoval && id.dev != nil {
			id.ch.removeDevice(id.dev)
		}
		if breaks && ev.Type == EventDisconnected {
			// Answer the peer's DREQ with a DREP (librdmacm leaves that to
			// the application, which must call rdma_disconnect; the
			// kernel does it for its own users' QPs). An extra DISCONNECT
			// after our own is refused by the CM and ignored.
			go id.Disconnect()
		}
		return
	}
	id.replies = append(id.replies, ev)
	sig := id.sig
	id.mu.Unlock()
	poke(sig)
}

// flush moves the ID's QP to ERR, so its posted work requests complete
// with flush errors.
func (id *ID) flush(qp *uverbs.QP) {
	if qp != nil {
		a := uverbs.QPAttr{State: uverbs.QPStateErr}
		_ = qp.Modify(&a, uverbs.QPAttrState) // fails once the QP is closed: nothing to flush
	}
}

func (id *ID) stop(err error) {
	id.mu.Lock()
	if id.closeErr == nil {
		id.closeErr = err
		fire(&id.closedCh)
		id.onBreak = nil
	}
	id.mu.Unlock()
}

// wait returns the next reply event, which must be one of want. It
// returns early when ctx is done, the ID is closed, or (breakOn) a
// DISCONNECTED or DEVICE_REMOVAL event arrives.
func (id *ID) wait(ctx context.Context, op string, breakOn bool, want ...EventType) (Event, error) {
	for {
		id.mu.Lock()
		if len(id.replies) > 0 {
			ev := id.replies[0]
			id.replies = id.replies[1:]
			id.mu.Unlock()
			for _, w := range want {
				if ev.Type == w {
					return ev, nil
				}
			}
			return ev, opError(op, &EventError{Event: ev})
		}
		closeErr, broken := id.closeErr, id.broken
		sig, closedCh := signal(&id.sig), latch(&id.closedCh)
		var brokenCh chan struct{} // nil: never ready
		if breakOn {
			brokenCh = latch(&id.brokenCh)
		}
		id.mu.Unlock()
		if closeErr != nil {
			return Event{}, opError(op, closeErr)
		}
		if breakOn && broken != nil {
			return Event{}, opError(op, broken)
		}
		select {
		case <-sig:
		case <-brokenCh:
		case <-closedCh:
		case <-ctx.Done():
			return Event{}, opError(op, ctx.Err())
		}
	}
}

// timeoutMS turns ctx's deadline into the kernel's timeout for an
// address or route resolution (at least 1 ms; 2 s without a deadline,
// librdmacm's customary value).
func timeoutMS(ctx context.Context) uint32 {
	d, ok := ctx.Deadline()
	if !ok {
		return 2000
	}
	ms := time.Until(d).Milliseconds()
	return uint32(max(1, min(ms, 1<<31-1)))
}

// Bind binds the ID to a local address and port (BIND): a zero port
// picks one, an unspecified address binds to every device (a listener) or
// lets ResolveAddr choose. A link-local IPv6 address needs its zone.
// An address of one device binds the ID to that device, and Bind opens it
// as librdmacm's rdma_bind_addr does (Context and PD are set after it):
// a listener's first request then finds its device open.
func (id *ID) Bind(addr netip.AddrPort) error {
	var req abi.RdmaUcmBind
	req.Id = id.kid
	req.AddrSize = uint16(putSockaddr(abi.Bytes(&req.Addr), addr, false))
	if err := id.write("Bind", abi.RDMA_USER_CM_CMD_BIND, abi.Bytes(&req), nil); err != nil {
		return err
	}
	return id.openDevice("Bind", false)
}

// ResolveAddr resolves dst to an RDMA device and port (RESOLVE_ADDR, then
// the ADDR_RESOLVED event), binding to src first if it is valid. ctx's
// deadline is the kernel's timeout too.
func (id *ID) ResolveAddr(ctx context.Context, src, dst netip.AddrPort) error {
	var req abi.RdmaUcmResolveAddr
	req.Id = id.kid
	req.TimeoutMs = timeoutMS(ctx)
	v6 := dst.Addr().Is6() && !dst.Addr().Is4In6()
	if src.IsValid() {
		req.SrcSize = uint16(putSockaddr(abi.Bytes(&req.SrcAddr), src, v6))
	}
	req.DstSize = uint16(putSockaddr(abi.Bytes(&req.DstAddr), dst, v6))
	if err := id.write("ResolveAddr", abi.RDMA_USER_CM_CMD_RESOLVE_ADDR, abi.Bytes(&req), nil); err != nil {
		return err
	}
	if _, err := id.wait(ctx, "ResolveAddr", false, EventAddrResolved); err != nil {
		return err
	}
	return id.bindDevice("ResolveAddr")
}

// ResolveRoute resolves the route to the address ResolveAddr resolved
// (RESOLVE_ROUTE, then ROUTE_RESOLVED). ctx's deadline is the kernel's
// timeout too.
func (id *ID) ResolveRoute(ctx context.Context) error {
	req := abi.RdmaUcmResolveRoute{Id: id.kid, TimeoutMs: timeoutMS(ctx)}
	if err := id.write("ResolveRoute", abi.RDMA_USER_CM_CMD_RESOLVE_ROUTE, abi.Bytes(&req), nil); err != nil {
		return err
	}
	_, err := id.wait(ctx, "ResolveRoute", false, EventRouteResolved)
	return err
}

// query asks QUERY(ADDR) for the ID's device, port and addresses.
func (id *ID) query(op string) (queryAddr, error) {
	var resp abi.RdmaUcmQueryAddrResp
	out := abi.Bytes(&resp)
	req := abi.RdmaUcmQuery{Id: id.kid, Option: abi.RDMA_USER_CM_QUERY_ADDR}
	if err := id.call(op, abi.RDMA_USER_CM_CMD_QUERY, abi.Bytes(&req), respAtQuery, out); err != nil {
		return queryAddr{}, err
	}
	q, err := decodeQueryAddr(out)
	return q, opError(op, err)
}

// bindDevice opens the device the ID is now bound to.
func (id *ID) bindDevice(op string) error { return id.openDevice(op, true) }

// openDevice opens the device the ID is bound to; with need false, an ID
// bound to none (a BIND of an unspecified address: the kernel reports
// node GUID 0) is no error.
func (id *ID) openDevice(op string, need bool) error {
	q, err := id.query(op)
	if err != nil || (q.NodeGUID == 0 && !need) {
		return err
	}
	d, err := id.ch.deviceFor(q.NodeGUID, q.IBDevIndex)
	if err != nil {
		return opError(op, err)
	}
	id.dev, id.port = d, q.Port
	return nil
}

// LocalAddr and RemoteAddr are the ID's addresses (QUERY ADDR).
func (id *ID) LocalAddr() (netip.AddrPort, error) {
	q, err := id.query("LocalAddr")
	if err != nil {
		return netip.AddrPort{}, err
	}
	a, err := parseSockaddr(q.Src)
	return a, opError("LocalAddr", err)
}

// RemoteAddr is the address of the ID's peer (QUERY ADDR).
func (id *ID) RemoteAddr() (netip.AddrPort, error) {
	q, err := id.query("RemoteAddr")
	if err != nil {
		return netip.AddrPort{}, err
	}
	a, err := parseSockaddr(q.Dst)
	return a, opError("RemoteAddr", err)
}

// Context is the uverbs context of the device the CM chose for the ID
// (after ResolveAddr, a Bind to one device's address, or for an ID from a
// connection request), owned by the channel; nil before.
func (id *ID) Context() *uverbs.Context {
	if id.dev == nil {
		return nil
	}
	return id.dev.ctx
}

// PD is the channel's protection domain on the ID's device; nil before
// the device is known.
func (id *ID) PD() *uverbs.PD {
	if id.dev == nil {
		return nil
	}
	return id.dev.pd
}

// Port is the device port the ID is bound to (0 before).
func (id *ID) Port() int { return int(id.port) }

// Device is the RDMA device the ID is bound to.
func (id *ID) Device() uverbs.Device {
	if id.dev == nil {
		return uverbs.Device{}
	}
	return id.dev.dev
}

// iWARP reports whether the ID's device is an iWARP device (siw): the CM
// moves its QPs, there is no route step.
func (id *ID) iWARP() bool { return id.dev != nil && id.dev.dev.Transport == uverbs.TransportIWARP }

// InitQPAttr asks the CM for the attributes that move a QP of this ID to
// state (INIT_QP_ATTR), translated into a uverbs.QPAttr and mask.
func (id *ID) InitQPAttr(state uverbs.QPState) (uverbs.QPAttr, uverbs.QPAttrMask, error) {
	out := make([]byte, 144)
	req := abi.RdmaUcmInitQpAttr{Id: id.kid, QpState: uint32(state)}
	if err := id.call("InitQPAttr", abi.RDMA_USER_CM_CMD_INIT_QP_ATTR, abi.Bytes(&req), respAtInitQPAttr, out); err != nil {
		return uverbs.QPAttr{}, 0, err
	}
	a, m, err := decodeQPAttr(out)
	return a, m, opError("InitQPAttr", err)
}

// ModifyQP moves qp to state with the attributes the CM gives
// (InitQPAttr, then QP.Modify).
func (id *ID) ModifyQP(qp *uverbs.QP, state uverbs.QPState) error {
	return id.modifyQP(qp, state, nil)
}

// modifyQP is ModifyQP with the READ depths of depths (when not nil) in
// place of the CM's, where the CM gives them.
func (id *ID) modifyQP(qp *uverbs.QP, state uverbs.QPState, depths *Config) error {
	a, m, err := id.InitQPAttr(state)
	if err != nil {
		return err
	}
	if m == 0 {
		return nil
	}
	if depths != nil {
		if m&uverbs.QPAttrMaxDestRDAtomic != 0 {
			a.MaxDestRDAtomic = depths.ResponderResources
		}
		if m&uverbs.QPAttrMaxQPRDAtomic != 0 {
			a.MaxRDAtomic = depths.InitiatorDepth
		}
	}
	// The CM resolved the peer's address (ModifyResolved).
	if err := qp.ModifyResolved(&a, m); err != nil {
		return opError(fmt.Sprintf("ModifyQP(%v)", state), err)
	}
	return nil
}

// Listen makes a bound ID listen for connection requests (LISTEN); Accept
// (on the Listener made by Listen) or NextRequest returns them.
func (id *ID) Listen(backlog int) error {
	if backlog <= 0 {
		backlog = 1024
	}
	req := abi.RdmaUcmListen{Id: id.kid, Backlog: uint32(backlog)}
	return id.write("Listen", abi.RDMA_USER_CM_CMD_LISTEN, abi.Bytes(&req), nil)
}

// NextRequest returns the next connection request of a listening ID.
func (id *ID) NextRequest(ctx context.Context) (*ConnRequest, error) {
	for {
		id.mu.Lock()
		if len(id.requests) > 0 {
			r := id.requests[0]
			id.requests = id.requests[1:]
			id.mu.Unlock()
			return r, nil
		}
		closeErr := id.closeErr
		sig, closedCh := signal(&id.sig), latch(&id.closedCh)
		id.mu.Unlock()
		if closeErr != nil {
			return nil, opError("Accept", closeErr)
		}
		select {
		case <-sig:
		case <-closedCh:
		case <-ctx.Done():
			return nil, opError("Accept", ctx.Err())
		}
	}
}

// NextEvent returns the next event that is not the answer to a request
// (DISCONNECTED, DEVICE_REMOVAL, ADDR_CHANGE, TIMEWAIT_EXIT), waiting for
// one until ctx is done or the ID is closed.
func (id *ID) NextEvent(ctx context.Context) (Event, error) {
	for {
		id.mu.Lock()
		if len(id.async) > 0 {
			ev := id.async[0]
			id.async = id.async[1:]
			id.mu.Unlock()
			return ev, nil
		}
		closeErr := id.closeErr
		asig, closedCh := signal(&id.asig), latch(&id.closedCh)
		id.mu.Unlock()
		if closeErr != nil {
			return Event{}, opError("NextEvent", closeErr)
		}
		select {
		case <-asig:
		case <-closedCh:
		case <-ctx.Done():
			return Event{}, opError("NextEvent", ctx.Err())
		}
	}
}

// Done is closed when a DISCONNECTED or DEVICE_REMOVAL event arrives for
// the ID; Err says which.
func (id *ID) Done() <-chan struct{} {
	id.mu.Lock()
	defer id.mu.Unlock()
	return latch(&id.brokenCh)
}

// AfterDone arranges for f to run, in a goroutine of its own, once Done
// is closed (at once if it already is): a way to wake a goroutine that
// waits on something else, such as CQ.Wait on a QP whose work requests
// had all completed (flushed) before the CM reported the disconnect, with
// no goroutine per connection while it is up. f is dropped, not run, if
// the ID is closed first.
func (id *ID) AfterDone(f func()) {
	id.mu.Lock()
	if id.broken == nil && id.closeErr == nil {
		id.onBreak = append(id.onBreak, f)
		id.mu.Unlock()
		return
	}
	broken := id.broken != nil
	id.mu.Unlock()
	if broken {
		go f()
	}
}

// Err is ErrDisconnected or ErrDeviceRemoved once Done is closed, nil before.
func (id *ID) Err() error {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.broken
}

// Disconnect disconnects the ID's connection (DISCONNECT). The CM moves
// the QP to ERR (IB, RoCE) or its iWARP equivalent; posted work requests
// complete with flush errors. Both sides get a DISCONNECTED event. After
// Close it returns an error matching ErrClosed.
func (id *ID) Disconnect() error {
	req := abi.RdmaUcmDisconnect{Id: id.kid}
	return id.write("Disconnect", abi.RDMA_USER_CM_CMD_DISCONNECT, abi.Bytes(&req), nil)
}

// Close destroys the ID (DESTROY_ID) and wakes its blocked calls with an
// error matching ErrClosed. It is idempotent; it does not close a QP the
// caller created.
func (id *ID) Close() error {
	var err error
	id.closing.Do(func() {
		id.mu.Lock()
		mcs := id.mcasts
		id.mcasts = nil
		reqs := id.requests
		id.requests = nil
		id.mu.Unlock()
		for _, mc := range mcs {
			id.ch.unregister(mc.uid)
		}
		for _, r := range reqs {
			r.Reject(nil) //nolint:errcheck // best effort: the listener is going
			r.ID.Close()
		}
		id.ch.unregister(id.uid)
		for _, ch := range id.formerChs {
			ch.unregister(id.uid)
		}
		req := abi.RdmaUcmDestroyId{Id: id.kid}
		var resp abi.RdmaUcmDestroyIdResp
		id.kmu.Lock()
		err = id.ch.call("Close", abi.RDMA_USER_CM_CMD_DESTROY_ID, abi.Bytes(&req), respAtDestroyID, abi.Bytes(&resp))
		id.destroyed = true // the kernel's id is gone even when the write failed (a closed channel)
		id.kmu.Unlock()
		if errors.Is(err, ErrClosed) {
			err = nil // the channel's close destroyed it
		}
		id.stop(ErrClosed)
	})
	return err
}

// write sends a command that names the ID's kernel id, or fails with
// ErrClosed once Close has destroyed it. The kernel gives a destroyed id
// at once to the next ID created (ucma.c: xa_alloc takes the lowest free
// one) and takes commands for any id of the same file, so a command made
// after DESTROY_ID (the Disconnect that answers a peer's DREQ from its own
// goroutine, a Disconnect after Close) would act on another connection:
// on 5.10 that disconnected a new siw connection the moment it was set up
// (rdmacm's TestRigSIWFirstMessage, about one run in three).
func (id *ID) write(op string, cmd uint32, in, keep []byte) error {
	id.kmu.RLock()
	defer id.kmu.RUnlock()
	if id.destroyed {
		return opError(op, ErrClosed)
	}
	return id.ch.write(op, cmd, in, keep, id.dev != nil && !id.iWARP())
}

// call is write for a command with a response (EventChannel.call).
func (id *ID) call(op string, cmd uint32, in []byte, respAt int, out []byte) error {
	id.kmu.RLock()
	defer id.kmu.RUnlock()
	if id.destroyed {
		return opError(op, ErrClosed)
	}
	return id.ch.call(op, cmd, in, respAt, out)
}

// setOption is SET_OPTION with an integer value of size n.
func (id *ID) setOption(op string, level, name uint32, val []byte) error {
	req := abi.RdmaUcmSetOption{Optval: addrOf(val), Id: id.kid, Level: level, Optname: name, Optlen: uint32(len(val))}
	return id.write(op, abi.RDMA_USER_CM_CMD_SET_OPTION, abi.Bytes(&req), val)
}

// SetTOS sets the type of service of the ID's traffic (RDMA_OPTION_ID_TOS).
func (id *ID) SetTOS(tos uint8) error {
	return id.setOption("SetTOS", abi.RDMA_OPTION_ID, abi.RDMA_OPTION_ID_TOS, []byte{tos})
}

// SetReuseAddr lets the ID bind to an address in TIME_WAIT
// (RDMA_OPTION_ID_REUSEADDR); before Bind.
func (id *ID) SetReuseAddr(on bool) error {
	return id.setOption("SetReuseAddr", abi.RDMA_OPTION_ID, abi.RDMA_OPTION_ID_REUSEADDR, intOpt(on))
}

// SetAFOnly makes an IPv6 listener take IPv6 connections only
// (RDMA_OPTION_ID_AFONLY); before Bind.
func (id *ID) SetAFOnly(on bool) error {
	return id.setOption("SetAFOnly", abi.RDMA_OPTION_ID, abi.RDMA_OPTION_ID_AFONLY, intOpt(on))
}

// SetAckTimeout sets the QP's local ACK timeout exponent (4.096 µs ×
// 2^t; RDMA_OPTION_ID_ACK_TIMEOUT) that INIT_QP_ATTR gives for RTS.
func (id *ID) SetAckTimeout(t uint8) error {
	return id.setOption("SetAckTimeout", abi.RDMA_OPTION_ID, abi.RDMA_OPTION_ID_ACK_TIMEOUT, []byte{t})
}

func intOpt(on bool) []byte {
	v := uint32(0)
	if on {
		v = 1
	}
	return binary.NativeEndian.AppendUint32(nil, v) // the kernel reads an int
}
