package provider

import "fmt"

// SGE is one scatter/gather element: Length bytes at Addr in the memory
// region whose local key is LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// WROpcode is a send work request's operation (enum ib_uverbs_wr_opcode).
type WROpcode uint8

// Send opcodes; the values are the kernel's IB_UVERBS_WR_*.
const (
	WRRDMAWrite         WROpcode = 0
	WRRDMAWriteWithImm  WROpcode = 1
	WRSend              WROpcode = 2
	WRSendWithImm       WROpcode = 3
	WRRDMARead          WROpcode = 4
	WRAtomicCmpAndSwp   WROpcode = 5
	WRAtomicFetchAndAdd WROpcode = 6
	WRLocalInv          WROpcode = 7
	WRBindMW            WROpcode = 8
	WRSendWithInv       WROpcode = 9
)

var wrOpcodeNames = map[WROpcode]string{
	WRRDMAWrite: "RDMA_WRITE", WRRDMAWriteWithImm: "RDMA_WRITE_WITH_IMM", WRSend: "SEND",
	WRSendWithImm: "SEND_WITH_IMM", WRRDMARead: "RDMA_READ", WRAtomicCmpAndSwp: "ATOMIC_CMP_AND_SWP",
	WRAtomicFetchAndAdd: "ATOMIC_FETCH_AND_ADD", WRLocalInv: "LOCAL_INV", WRBindMW: "BIND_MW",
	WRSendWithInv: "SEND_WITH_INV",
}

// String is the opcode's libibverbs name without IBV_WR_ ("RDMA_WRITE"),
// or "WROpcode(N)".
func (o WROpcode) String() string {
	if s, ok := wrOpcodeNames[o]; ok {
		return s
	}
	return fmt.Sprintf("WROpcode(%d)", uint8(o))
}

// SendFlags modify a send work request (IBV_SEND_*; the values are the
// kernel's IB_SEND_*).
type SendFlags uint32

// Send flags.
const (
	SendFence     SendFlags = 1 << 0 // wait for prior RDMA READs and atomics
	SendSignaled  SendFlags = 1 << 1 // produce a completion even if the QP does not signal all
	SendSolicited SendFlags = 1 << 2 // set the solicited-event bit at the receiver
	SendInline    SendFlags = 1 << 3 // copy the SGL's bytes into the WQE; no lkey needed
)

// SendWR is a send work request. Which fields matter depends on Opcode and
// the QP type, as in libibverbs' struct ibv_send_wr (a slice replaces the
// linked list).
type SendWR struct {
	ID     uint64
	Opcode WROpcode
	Flags  SendFlags
	SGL    []SGE
	// Imm is the immediate data of *_WITH_IMM opcodes, as the application
	// means it; it travels big-endian and arrives as the same value.
	Imm uint32
	// InvalidateRKey is the rkey SEND_WITH_INV and LOCAL_INV invalidate.
	InvalidateRKey uint32
	// RemoteAddr and RKey address RDMA and atomic operations.
	RemoteAddr uint64
	RKey       uint32
	// CompareAdd is the value to compare (CMP_AND_SWP) or add (FETCH_AND_ADD);
	// Swap is the value swapped in.
	CompareAdd, Swap uint64
	// UD is the destination of a send on a UD QP.
	UD UDDest
	// Bind is what a BIND_MW request binds.
	Bind MWBind
	// RemoteSRQN is the XRC SRQ on the target that a send of an XRC
	// initiator QP lands in (ibv_send_wr's qp_type.xrc.remote_srqn).
	RemoteSRQN uint32
}

// MWBind binds a memory window (WRBindMW): the window whose current key is
// MWRKey gets Length bytes at Addr of the memory region whose local key is
// MRLKey, with Access rights (IB access bits: remote read, write, atomic,
// zero-based), and NewRKey as its key from then on (for a type 2 window,
// the same index with a new low byte; a type 1 window keeps MWRKey's index).
type MWBind struct {
	MWRKey  uint32
	NewRKey uint32
	MRLKey  uint32
	Addr    uint64
	Length  uint64
	Access  uint32
}

// UDDest addresses a UD send.
type UDDest struct {
	AH        AddressHandle
	RemoteQPN uint32
	QKey      uint32
}

// RecvWR is a receive work request.
type RecvWR struct {
	ID  uint64
	SGL []SGE
}

// WCStatus is a work completion's status (enum ib_wc_status / ibv_wc_status).
type WCStatus uint32

// Completion statuses.
const (
	WCSuccess WCStatus = iota
	WCLocLenErr
	WCLocQPOpErr
	WCLocEECOpErr
	WCLocProtErr
	WCWRFlushErr
	WCMWBindErr
	WCBadRespErr
	WCLocAccessErr
	WCRemInvReqErr
	WCRemAccessErr
	WCRemOpErr
	WCRetryExcErr
	WCRNRRetryExcErr
	WCLocRDDViolErr
	WCRemInvRDReqErr
	WCRemAbortErr
	WCInvEECNErr
	WCInvEECStateErr
	WCFatalErr
	WCRespTimeoutErr
	WCGeneralErr
	WCTMErr
	WCTMRndvIncomplete
)

// statusNames are libibverbs' ibv_wc_status_str texts.
var statusNames = [...]string{
	"success", "local length error", "local QP operation error", "local EE context operation error",
	"local protection error", "Work Request Flushed Error", "memory management operation error",
	"bad response error", "local access error", "remote invalid request error", "remote access error",
	"remote operation error", "transport retry counter exceeded", "RNR retry counter exceeded",
	"local RDD violation error", "remote invalid RD request", "aborted error", "invalid EE context number",
	"invalid EE context state", "fatal error", "response timeout error", "general error",
	"TM error", "TM software rendezvous",
}

// String is libibverbs' ibv_wc_status_str text ("success",
// "Work Request Flushed Error", …), or "unknown status N".
func (s WCStatus) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("unknown status %d", uint32(s))
}

// WCOpcode is the operation a completion reports (enum ibv_wc_opcode).
type WCOpcode uint32

// Completion opcodes; receive-side values have bit 7 set.
const (
	WCSend            WCOpcode = 0
	WCRDMAWrite       WCOpcode = 1
	WCRDMARead        WCOpcode = 2
	WCCompSwap        WCOpcode = 3
	WCFetchAdd        WCOpcode = 4
	WCBindMW          WCOpcode = 5
	WCLocalInv        WCOpcode = 6
	WCRecv            WCOpcode = 1 << 7
	WCRecvRDMAWithImm WCOpcode = WCRecv + 1
)

var wcOpcodeNames = map[WCOpcode]string{
	WCSend: "SEND", WCRDMAWrite: "RDMA_WRITE", WCRDMARead: "RDMA_READ", WCCompSwap: "COMP_SWAP",
	WCFetchAdd: "FETCH_ADD", WCBindMW: "BIND_MW", WCLocalInv: "LOCAL_INV", WCRecv: "RECV",
	WCRecvRDMAWithImm: "RECV_RDMA_WITH_IMM",
}

// String is the opcode's libibverbs name without IBV_WC_ ("RECV"), or
// "WCOpcode(N)".
func (o WCOpcode) String() string {
	if s, ok := wcOpcodeNames[o]; ok {
		return s
	}
	return fmt.Sprintf("WCOpcode(%d)", uint32(o))
}

// WCFlags qualify a completion (enum ibv_wc_flags).
type WCFlags uint32

// Completion flags.
const (
	WCWithGRH  WCFlags = 1 << 0
	WCWithImm  WCFlags = 1 << 1
	WCIPCSumOK WCFlags = 1 << 2
	WCWithInv  WCFlags = 1 << 3
)

// WorkCompletion is one completion (struct ibv_wc). Its fields lie as
// ib_uverbs_wc's do, which provider/rxe copies into it whole (keep the
// order: provider/rxe's TestWCLayout checks it).
type WorkCompletion struct {
	ID        uint64
	Status    WCStatus
	Opcode    WCOpcode
	VendorErr uint32
	ByteLen   uint32
	// Imm is the immediate data (WCWithImm), as the sender meant it, or
	// the invalidated rkey (WCWithInv).
	Imm          uint32
	QPNum        uint32
	SrcQP        uint32
	Flags        WCFlags
	PKeyIndex    uint16
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
	Port         uint8
}

// QPType is a queue pair's transport service (enum ib_uverbs_qp_type).
type QPType uint8

// QP types.
const (
	QPTypeRC QPType = 2
	QPTypeUC QPType = 3
	QPTypeUD QPType = 4
	// QPTypeXRCIni is an XRC initiator (IBV_QPT_XRC_SEND): a send queue
	// only, whose sends name the XRC SRQ they land in.
	QPTypeXRCIni QPType = 9
	// QPTypeXRCTgt is an XRC target (IBV_QPT_XRC_RECV): no queues of its
	// own, it hands what arrives to the XRC SRQs of its domain.
	QPTypeXRCTgt QPType = 10
)

// String is "RC", "UC", "UD", "XRC_INI", "XRC_TGT", or "QPType(N)".
func (t QPType) String() string {
	switch t {
	case QPTypeRC:
		return "RC"
	case QPTypeUC:
		return "UC"
	case QPTypeUD:
		return "UD"
	case QPTypeXRCIni:
		return "XRC_INI"
	case QPTypeXRCTgt:
		return "XRC_TGT"
	}
	return fmt.Sprintf("QPType(%d)", uint8(t))
}

// QPCap is a queue pair's capacities (struct ibv_qp_cap).
type QPCap struct {
	MaxSendWR, MaxRecvWR   uint32
	MaxSendSGE, MaxRecvSGE uint32
	MaxInlineData          uint32
}

// QPState is a queue pair's state (enum ib_uverbs_qp_state? the kernel's
// enum ib_qp_state).
type QPState uint8

// QP states.
const (
	QPStateReset QPState = iota
	QPStateInit
	QPStateRTR
	QPStateRTS
	QPStateSQD
	QPStateSQE
	QPStateErr
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

// String is the state's name without IBV_QPS_ ("RTS"), or "QPState(N)".
func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return fmt.Sprintf("QPState(%d)", uint8(s))
}
