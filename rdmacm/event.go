package rdmacm

import (
	"encoding/binary"
	"fmt"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/uverbs"
)

// EventType is an rdma_cm event (enum rdma_cm_event_type of the kernel's
// include/rdma/rdma_cm.h and librdmacm's rdma_cma.h; the uapi header has no
// copy, so the values are written here, checked by TestEventTypeNames).
type EventType uint32

// The rdma_cm events, with their C names.
const (
	EventAddrResolved    EventType = 0  // RDMA_CM_EVENT_ADDR_RESOLVED
	EventAddrError       EventType = 1  // RDMA_CM_EVENT_ADDR_ERROR
	EventRouteResolved   EventType = 2  // RDMA_CM_EVENT_ROUTE_RESOLVED
	EventRouteError      EventType = 3  // RDMA_CM_EVENT_ROUTE_ERROR
	EventConnectRequest  EventType = 4  // RDMA_CM_EVENT_CONNECT_REQUEST
	EventConnectResponse EventType = 5  // RDMA_CM_EVENT_CONNECT_RESPONSE
	EventConnectError    EventType = 6  // RDMA_CM_EVENT_CONNECT_ERROR
	EventUnreachable     EventType = 7  // RDMA_CM_EVENT_UNREACHABLE
	EventRejected        EventType = 8  // RDMA_CM_EVENT_REJECTED
	EventEstablished     EventType = 9  // RDMA_CM_EVENT_ESTABLISHED
	EventDisconnected    EventType = 10 // RDMA_CM_EVENT_DISCONNECTED
	EventDeviceRemoval   EventType = 11 // RDMA_CM_EVENT_DEVICE_REMOVAL
	EventMulticastJoin   EventType = 12 // RDMA_CM_EVENT_MULTICAST_JOIN
	EventMulticastError  EventType = 13 // RDMA_CM_EVENT_MULTICAST_ERROR
	EventAddrChange      EventType = 14 // RDMA_CM_EVENT_ADDR_CHANGE
	EventTimewaitExit    EventType = 15 // RDMA_CM_EVENT_TIMEWAIT_EXIT
)

var eventNames = [...]string{
	"ADDR_RESOLVED", "ADDR_ERROR", "ROUTE_RESOLVED", "ROUTE_ERROR", "CONNECT_REQUEST",
	"CONNECT_RESPONSE", "CONNECT_ERROR", "UNREACHABLE", "REJECTED", "ESTABLISHED",
	"DISCONNECTED", "DEVICE_REMOVAL", "MULTICAST_JOIN", "MULTICAST_ERROR", "ADDR_CHANGE",
	"TIMEWAIT_EXIT",
}

// String is the event's name without the RDMA_CM_EVENT_ prefix, as
// rdma_event_str prints it.
func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return fmt.Sprintf("EVENT_%d", uint32(t))
}

// async reports whether t is an event that is not the answer to a request:
// it may arrive at any time and is delivered to Conn.NextEvent.
func (t EventType) async() bool {
	switch t {
	case EventDisconnected, EventDeviceRemoval, EventAddrChange, EventTimewaitExit:
		return true
	}
	return false
}

// ConnParam is the connection parameters an event carries (struct
// rdma_ucm_conn_param): from a CONNECT_REQUEST, the peer's offer; from an
// ESTABLISHED or CONNECT_RESPONSE, what was agreed.
type ConnParam struct {
	QPN                uint32
	QKey               uint32
	SRQ                bool
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        uint8
	RetryCount         uint8
	RNRRetryCount      uint8
}

// UDParam is what a UD or multicast event carries (struct
// rdma_ucm_ud_param): the remote QPN and QKey and the address to send to.
type UDParam struct {
	QPN  uint32
	QKey uint32
	AH   uverbs.AHAttr
}

// Event is one rdma_cm event.
type Event struct {
	Type EventType
	// Status is the event's status: 0, a negative errno (ADDR_ERROR,
	// UNREACHABLE, …), or for REJECTED the consumer or CM reject reason.
	Status int32
	// PrivateData is the peer's private data (CONNECT_REQUEST,
	// CONNECT_RESPONSE, ESTABLISHED, REJECTED). IB CMs pad it: a
	// CONNECT_REQUEST on IB/RoCE carries 56 bytes whatever was sent.
	PrivateData []byte
	// Conn is set for connected (RC) port spaces, UD for UD and multicast
	// events.
	Conn ConnParam
	UD   UDParam
	// ECE is the enhanced connection establishment option (Linux 5.8+).
	ECE ECE

	uid uint64
	id  uint32
	ud  bool // the id is a UD id: Param is rdma_ucm_ud_param
}

// ECE is an enhanced connection establishment option (struct rdma_ucm_ece).
type ECE struct {
	VendorID uint32
	AttrMod  uint32
}

// Reason is the reject reason of a REJECTED event on an IB or RoCE CM:
// IB_CM_REJ_CONSUMER_DEFINED (28) when the peer called Reject.
func (e *Event) Reason() int { return int(e.Status) }

// decodeEvent decodes a struct rdma_ucm_event_resp. ud says whether the
// id it is for has a UD port space; param decodes as rdma_ucm_ud_param then.
func decodeEvent(b []byte, ud func(uid uint64, ev EventType) bool) (Event, error) {
	var r abi.RdmaUcmEventResp
	if len(b) < eventRespMin {
		return Event{}, fmt.Errorf("event: %d bytes, want at least %d", len(b), eventRespMin)
	}
	copy(abi.Bytes(&r), b)
	ev := Event{uid: r.Uid, id: r.Id, Type: EventType(r.Event), Status: int32(r.Status)}
	if len(b) >= len(abi.Bytes(&r)) {
		ev.ECE = ECE{VendorID: r.Ece.VendorId, AttrMod: r.Ece.AttrMod}
	}
	ev.ud = ud != nil && ud(ev.uid, ev.Type)
	p := r.Param[:]
	if ev.ud {
		var u abi.RdmaUcmUdParam
		copy(abi.Bytes(&u), p)
		ev.UD = UDParam{QPN: u.QpNum, QKey: u.Qkey, AH: ahFromABI(&u.AhAttr)}
		if n := int(u.PrivateDataLen); n > 0 {
			ev.PrivateData = append([]byte(nil), u.PrivateData[:min(n, len(u.PrivateData))]...)
		}
		return ev, nil
	}
	var c abi.RdmaUcmConnParam
	copy(abi.Bytes(&c), p)
	ev.Conn = ConnParam{
		QPN: c.QpNum, QKey: c.Qkey, SRQ: c.Srq != 0, ResponderResources: c.ResponderResources,
		InitiatorDepth: c.InitiatorDepth, FlowControl: c.FlowControl, RetryCount: c.RetryCount,
		RNRRetryCount: c.RnrRetryCount,
	}
	if n := int(c.PrivateDataLen); n > 0 {
		ev.PrivateData = append([]byte(nil), c.PrivateData[:min(n, len(c.PrivateData))]...)
	}
	return ev, nil
}

// ahFromABI translates the kernel's struct ib_uverbs_ah_attr.
func ahFromABI(a *abi.IbUverbsAhAttr) uverbs.AHAttr {
	ah := uverbs.AHAttr{DLID: a.Dlid, SL: a.Sl, SrcPathBits: a.SrcPathBits, StaticRate: a.StaticRate, PortNum: a.PortNum}
	if a.IsGlobal != 0 {
		ah.GRH = &uverbs.GlobalRoute{DGID: a.Grh.Dgid, FlowLabel: a.Grh.FlowLabel, SGIDIndex: a.Grh.SgidIndex,
			HopLimit: a.Grh.HopLimit, TrafficClass: a.Grh.TrafficClass}
	}
	return ah
}

// decodeQPAttr translates the struct ib_uverbs_qp_attr INIT_QP_ATTR
// returns into a uverbs.QPAttr and its mask. The kernel's mask may carry
// bits the MODIFY_QP command has no fields for (librdmacm clears
// 0xe00000 on IB); only the bits uverbs.QPAttrMask names are kept.
func decodeQPAttr(b []byte) (uverbs.QPAttr, uverbs.QPAttrMask, error) {
	var r abi.IbUverbsQpAttr
	if len(b) < len(abi.Bytes(&r)) {
		return uverbs.QPAttr{}, 0, fmt.Errorf("qp_attr: %d bytes, want %d", len(b), len(abi.Bytes(&r)))
	}
	copy(abi.Bytes(&r), b)
	a := uverbs.QPAttr{
		State: uverbs.QPState(r.QpState), CurState: uverbs.QPState(r.CurQpState), PathMTU: uverbs.MTU(r.PathMtu),
		PathMigState: uint8(r.PathMigState), QKey: r.Qkey, RQPSN: r.RqPsn, SQPSN: r.SqPsn, DestQPN: r.DestQpNum,
		AccessFlags: uverbs.Access(r.QpAccessFlags),
		Cap: uverbs.QPCap{MaxSendWR: r.MaxSendWr, MaxRecvWR: r.MaxRecvWr, MaxSendSGE: r.MaxSendSge,
			MaxRecvSGE: r.MaxRecvSge, MaxInlineData: r.MaxInlineData},
		AH: ahFromABI(&r.AhAttr), AltAH: ahFromABI(&r.AltAhAttr),
		PKeyIndex: r.PkeyIndex, AltPKeyIndex: r.AltPkeyIndex, EnSQDAsyncNotify: r.EnSqdAsyncNotify,
		SQDraining: r.SqDraining, MaxRDAtomic: r.MaxRdAtomic, MaxDestRDAtomic: r.MaxDestRdAtomic,
		MinRNRTimer: r.MinRnrTimer, PortNum: r.PortNum, Timeout: r.Timeout, RetryCnt: r.RetryCnt,
		RNRRetry: r.RnrRetry, AltPortNum: r.AltPortNum, AltTimeout: r.AltTimeout,
	}
	return a, uverbs.QPAttrMask(r.QpAttrMask) & knownQPMask, nil
}

// knownQPMask is every IB_QP_* bit MODIFY_QP has a field for (0 … 20).
const knownQPMask = uverbs.QPAttrMask(1<<21 - 1)

// queryAddr is the answer to QUERY(ADDR): the device and port an id is
// bound to, and its addresses.
type queryAddr struct {
	NodeGUID   uint64 // host order
	Port       uint8
	PKey       uint16
	Src, Dst   []byte
	IBDevIndex uint32
}

func decodeQueryAddr(b []byte) (queryAddr, error) {
	var r abi.RdmaUcmQueryAddrResp
	if len(b) < len(abi.Bytes(&r)) {
		return queryAddr{}, fmt.Errorf("query addr: %d bytes, want %d", len(b), len(abi.Bytes(&r)))
	}
	copy(abi.Bytes(&r), b)
	q := queryAddr{Port: r.PortNum, PKey: r.Pkey, IBDevIndex: r.IbdevIndex}
	// node_guid is __be64 in the kernel (the field is declared __aligned_u64).
	q.NodeGUID = binary.BigEndian.Uint64(b[0:8])
	if r.SrcSize > 128 || r.DstSize > 128 {
		return queryAddr{}, fmt.Errorf("query addr: address sizes %d, %d", r.SrcSize, r.DstSize)
	}
	q.Src = append([]byte(nil), abi.Bytes(&r.SrcAddr)[:r.SrcSize]...)
	q.Dst = append([]byte(nil), abi.Bytes(&r.DstAddr)[:r.DstSize]...)
	return q, nil
}
