package uverbs

import (
	"fmt"
	"math/rand/v2"
)

// Endpoint is one side of a connection: what a peer must learn, out of
// band (a TCP socket, rdma_cm's messages), to send to this QP, plus the
// local port and GID index the QP sends from. QP.Endpoint makes the local
// one; the peer's arrives from the wire. The zero GID means a LID-routed
// InfiniBand address (no GRH); RoCE and iWARP always have a GID.
type Endpoint struct {
	QPN uint32 // queue pair number
	// PSN is the first packet sequence number the QP sends (24 bits);
	// the peer expects it.
	PSN uint32
	LID uint16   // the port's LID (0 on RoCE)
	GID [16]byte // the source GID (network byte order), zero for none
	// GIDIndex is GID's index in the port's table: the sgid_index of the
	// addresses this side builds. Only the local endpoint's is used.
	GIDIndex int
	Port     int // port number, from 1
	// MTU is the largest path MTU this side accepts (its port's active
	// MTU); 0 for no limit. Connect uses the smaller of both sides'.
	MTU MTU
}

// Endpoint returns qp's local endpoint on port, with GID gidIndex (-1: no
// GID, for LID-routed InfiniBand) and a random PSN: QUERY_PORT and, with a
// GID, one GID query (two syscalls). Send it to the peer; keep it for
// Connect.
func (qp *QP) Endpoint(port, gidIndex int) (Endpoint, error) {
	c := qp.pd.ctx
	pa, err := c.QueryPort(port)
	if err != nil {
		return Endpoint{}, err
	}
	e := Endpoint{QPN: qp.qpn, PSN: rand.Uint32() & psnMask, LID: pa.LID, GIDIndex: gidIndex, Port: port, MTU: pa.ActiveMTU}
	if gidIndex >= 0 {
		g, err := c.QueryGID(port, gidIndex)
		if err != nil {
			return Endpoint{}, err
		}
		e.GID = g.GID
	}
	return e, nil
}

const psnMask = 1<<24 - 1

// ConnectOptions are the settings of a connection that are not endpoint
// information. The zero value is a connection with no remote access, the
// smaller active MTU of both ports (1024 if neither says), and libibverbs'
// examples' timers; integer fields that are 0 take the default given, and
// -1 asks for the value 0 itself.
type ConnectOptions struct {
	// Access is what the peer may do to this side's memory through the QP
	// (AccessRemoteWrite, AccessRemoteRead, AccessRemoteAtomic); RC and UC.
	Access Access
	// MTU, if set, is the path MTU, whatever the endpoints say (RC, UC).
	MTU MTU
	// PKeyIndex is the P_Key table index (0: the default partition).
	PKeyIndex uint16
	// QKey is a UD QP's Q_Key.
	QKey uint32

	// Address: service level, and the GRH's hop limit (default 64),
	// traffic class and flow label.
	SL           uint8
	HopLimit     uint8
	TrafficClass uint8
	FlowLabel    uint32

	// RC only: outstanding RDMA reads and atomics this side may issue
	// (MaxRDAtomic, default 1) and accepts from the peer (MaxDestRDAtomic,
	// default 1); the local ACK timeout (Timeout: 4.096 µs·2^Timeout,
	// default 14, -1 for infinite), transport retries (RetryCnt, default
	// 7) and RNR retries (RNRRetry, default 7: infinite); the RNR NAK
	// timer this side asks the peer to wait (MinRNRTimer, default 12:
	// 0.64 ms; -1 is the code 0, 655.36 ms).
	MaxRDAtomic     int
	MaxDestRDAtomic int
	Timeout         int
	RetryCnt        int
	RNRRetry        int
	MinRNRTimer     int

	// Resolved says the remote's address was resolved just now (the
	// program has just exchanged packets with that IP address, or rdma_cm
	// resolved it) or is local (a loopback to the same GID): Connect then
	// makes the RTR step with ModifyResolved, a raw syscall on software
	// devices, instead of Modify.
	Resolved bool
}

// orDefault is v, def when v is 0, and 0 when v is negative.
func orDefault(v, def int) uint8 {
	switch {
	case v < 0:
		return 0
	case v == 0:
		return uint8(def)
	}
	return uint8(v)
}

// PathTo is the address of remote as seen from local (the AH of an RC or
// UC QP, or of a UD send): a GRH from local's GID index to remote's GID
// when remote has a GID, LID-routed otherwise.
func (local Endpoint) PathTo(remote Endpoint, o ConnectOptions) AHAttr {
	a := AHAttr{DLID: remote.LID, SL: o.SL, PortNum: uint8(local.Port)}
	if remote.GID != ([16]byte{}) {
		hop := o.HopLimit
		if hop == 0 {
			hop = 64
		}
		a.GRH = &GlobalRoute{DGID: remote.GID, SGIDIndex: uint8(local.GIDIndex), HopLimit: hop,
			TrafficClass: o.TrafficClass, FlowLabel: o.FlowLabel}
	}
	return a
}

// pathMTU is the MTU two endpoints agree on.
func pathMTU(local, remote Endpoint, o ConnectOptions) MTU {
	if o.MTU != 0 {
		return o.MTU
	}
	m := local.MTU
	if m == 0 || (remote.MTU != 0 && remote.MTU < m) {
		m = remote.MTU
	}
	if m == 0 {
		m = MTU1024
	}
	return m
}

// QPTransition is one MODIFY_QP of a connection: the attributes and the
// mask naming them.
type QPTransition struct {
	Attr QPAttr
	Mask QPAttrMask
}

// ConnectSteps returns the transitions Connect makes, from RESET: INIT,
// RTR and RTS for an RC or UC QP of type t towards remote, INIT (with the
// Q_Key), RTR and RTS for UD (remote unused). Programs that time or
// interleave the transitions run them with Modify.
func ConnectSteps(t QPType, local, remote Endpoint, o ConnectOptions) []QPTransition {
	init := QPTransition{QPAttr{State: QPStateInit, PKeyIndex: o.PKeyIndex, PortNum: uint8(local.Port)},
		QPAttrState | QPAttrPKeyIndex | QPAttrPort}
	rtr := QPTransition{QPAttr{State: QPStateRTR}, QPAttrState}
	rts := QPTransition{QPAttr{State: QPStateRTS, SQPSN: local.PSN & psnMask}, QPAttrState | QPAttrSQPSN}
	switch t {
	case QPTypeUD:
		init.Attr.QKey = o.QKey
		init.Mask |= QPAttrQKey
		return []QPTransition{init, rtr, rts}
	case QPTypeRC, QPTypeXRCIni, QPTypeXRCTgt:
		// XRC's transitions are RC's: the kernel drops what a side does
		// not use (modify_qp_mask: the initiator's responder attributes,
		// the target's requester ones).
		rtr.Attr.MaxDestRDAtomic, rtr.Attr.MinRNRTimer = orDefault(o.MaxDestRDAtomic, 1), orDefault(o.MinRNRTimer, 12)
		rtr.Mask |= QPAttrMaxDestRDAtomic | QPAttrMinRNRTimer
		a := &rts.Attr
		a.Timeout, a.RetryCnt, a.RNRRetry, a.MaxRDAtomic = orDefault(o.Timeout, 14), orDefault(o.RetryCnt, 7),
			orDefault(o.RNRRetry, 7), orDefault(o.MaxRDAtomic, 1)
		rts.Mask |= QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRDAtomic
	}
	init.Attr.AccessFlags = o.Access
	init.Mask |= QPAttrAccessFlags
	r := &rtr.Attr
	r.AH, r.PathMTU, r.DestQPN, r.RQPSN = local.PathTo(remote, o), pathMTU(local, remote, o), remote.QPN, remote.PSN&psnMask
	rtr.Mask |= QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN
	return []QPTransition{init, rtr, rts}
}

// Connect makes qp ready to send and receive: RESET → INIT → RTR → RTS
// (three MODIFY_QPs), an RC or UC QP towards remote's QP, from local (the
// endpoint QP.Endpoint made, whose PSN the peer was sent). A UD QP needs
// no peer: remote is unused, and each send carries its address (an AH made
// from local.PathTo(remote, o)). A QP already in INIT or RTR (rdma_cm
// moves a QP to INIT itself) continues from there.
//
// Endpoints are checked before any command; if a transition fails, the
// error names it and the QP stays in the last state reached (Modify it to
// RESET to start again).
func (qp *QP) Connect(local, remote Endpoint, o ConnectOptions) error {
	dev := qp.pd.ctx.dev.Name
	t := qp.Type()
	switch {
	case local.Port < 1 || local.Port > 255:
		return argError("Connect", dev, "local port %d", local.Port)
	case local.QPN != 0 && local.QPN != qp.qpn:
		return argError("Connect", dev, "local endpoint is QP %d, not QP %d", local.QPN, qp.qpn)
	case t != QPTypeUD && (remote.QPN == 0 || remote.QPN > psnMask):
		return argError("Connect", dev, "remote QPN %d", remote.QPN)
	case t != QPTypeUD && remote.GID != ([16]byte{}) && (local.GIDIndex < 0 || local.GIDIndex > 255):
		return argError("Connect", dev, "the remote has a GID but the local GID index is %d", local.GIDIndex)
	case o.MTU != 0 && o.MTU.Bytes() == 0:
		return argError("Connect", dev, "MTU %d", uint8(o.MTU))
	}
	steps := ConnectSteps(t, local, remote, o)
	from := qp.State()
	switch from {
	case QPStateReset:
	case QPStateInit:
		steps = steps[1:]
	case QPStateRTR:
		steps = steps[2:]
	default:
		return argError("Connect", dev, "QP %d is in %v; Connect starts from RESET, INIT or RTR", qp.qpn, from)
	}
	for i := range steps {
		// Resolved changes only the step with an AV (ModifyResolved's rule).
		if err := qp.modifyQP(&steps[i].Attr, steps[i].Mask, o.Resolved); err != nil {
			return fmt.Errorf("uverbs: Connect QP %d to %v: %w", qp.qpn, steps[i].Attr.State, err)
		}
	}
	return nil
}

// ConnectPair connects two QPs of the same type to each other (or a QP to
// itself, when a == b), on this host (a loopback, or two devices that reach each other): each is given
// the other's endpoint on port with GID gidIndex (-1: LID-routed), the
// device of each queried for it. It is the helper of tests, tools and
// examples; programs across a network exchange Endpoints and call Connect
// on each side.
func ConnectPair(a, b *QP, port, gidIndex int, o ConnectOptions) error {
	ea, err := a.Endpoint(port, gidIndex)
	if err != nil {
		return err
	}
	if a == b {
		return a.Connect(ea, ea, o)
	}
	eb, err := b.Endpoint(port, gidIndex)
	if err != nil {
		return err
	}
	if err := a.Connect(ea, eb, o); err != nil {
		return err
	}
	return b.Connect(eb, ea, o)
}
