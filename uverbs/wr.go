package uverbs

import "github.com/goverbs/goverbs/provider"

// The work-request and completion types are defined in package provider,
// below both uverbs and the providers, because a provider's fast path
// reads and writes them directly: one definition, no conversion and no
// allocation between the program and the device's queue. These aliases
// are their public names, and they are documented here, field by field
// (a test keeps the copies equal to the structs), so that a program needs
// no other package's documentation.

type (
	// SGE is one scatter/gather element: Length bytes at Addr (an address
	// in the I/O virtual address space of the memory region whose local
	// key is LKey; for a region registered from a buffer, the buffer's
	// address). MR.SGE builds one from a region and a byte range.
	//
	//	type SGE struct {
	//		Addr   uint64
	//		Length uint32
	//		LKey   uint32
	//	}
	SGE = provider.SGE

	// SendWR is a send work request (struct ibv_send_wr; a slice of SGEs
	// replaces the linked list, and a slice of SendWRs the chain). Which
	// fields matter depends on Opcode and the QP type:
	//
	//	type SendWR struct {
	//		ID     uint64    // returned in the completion's ID
	//		Opcode WROpcode  // WRSend, WRRDMAWrite, WRRDMARead, …
	//		Flags  SendFlags // SendSignaled, SendInline, SendFence, SendSolicited
	//		SGL    []SGE     // the local memory sent from or read into
	//		Imm    uint32    // *WithImm: immediate data, as the application means it
	//		InvalidateRKey uint32 // WRSendWithInv, WRLocalInv: the rkey invalidated
	//		RemoteAddr uint64 // RDMA and atomics: the peer's address (MR.RemoteAddr)
	//		RKey       uint32 // RDMA and atomics: the peer's MR.RKey
	//		CompareAdd, Swap uint64 // atomics: compare (or add) value, swap value
	//		UD   UDDest // UD QPs: the destination
	//		Bind MWBind // WRBindMW: what the window binds
	//		RemoteSRQN uint32 // XRC initiator QPs: the target's XRC SRQ (SRQ.SRQN)
	//	}
	//
	// A request without SendSignaled completes silently unless the QP
	// was created with QPInit.SignalAll; an error always completes.
	SendWR = provider.SendWR

	// RecvWR is a receive work request: ID comes back in the completion,
	// and the message lands in the SGEs of SGL, in order.
	//
	//	type RecvWR struct {
	//		ID  uint64
	//		SGL []SGE
	//	}
	RecvWR = provider.RecvWR

	// UDDest addresses a send on a UD QP: the address handle of the
	// destination port (AH.ProviderAH()), its QP number and Q_Key.
	//
	//	type UDDest struct {
	//		AH        provider.AddressHandle // AH.ProviderAH()
	//		RemoteQPN uint32
	//		QKey      uint32
	//	}
	UDDest = provider.UDDest

	// MWBind is what a WRBindMW request binds: the window whose current
	// key is MWRKey gets Length bytes at Addr of the region whose local
	// key is MRLKey, with Access rights (uint32 of an Access), and NewRKey
	// as its key from then on.
	//
	//	type MWBind struct {
	//		MWRKey, NewRKey, MRLKey uint32
	//		Addr, Length            uint64
	//		Access                  uint32
	//	}
	MWBind = provider.MWBind

	// WorkCompletion is one completion (struct ibv_wc): the outcome of one
	// work request.
	//
	//	type WorkCompletion struct {
	//		ID        uint64   // the request's ID
	//		Status    WCStatus // WCSuccess, or why it failed (WCWRFlushErr: flushed by ERR)
	//		Opcode    WCOpcode // WCSend, WCRDMAWrite, …, WCRecv (valid on success)
	//		VendorErr uint32   // the device's own error code
	//		ByteLen   uint32   // receives: the bytes received
	//		Imm       uint32   // WCWithImm: immediate data; WCWithInv: the rkey invalidated
	//		QPNum     uint32   // the local QP
	//		SrcQP     uint32   // UD receives: the sender's QP
	//		Flags     WCFlags  // WCWithGRH, WCWithImm, WCWithInv, WCIPCSumOK
	//		PKeyIndex uint16
	//		SLID      uint16   // UD receives: the sender's LID
	//		SL        uint8
	//		DLIDPathBits uint8
	//		Port      uint8
	//	}
	//
	// Only ID, Status, Opcode (on success), VendorErr and QPNum are valid
	// for a failed completion.
	WorkCompletion = provider.WorkCompletion

	// WROpcode is a send work request's operation (enum ibv_wr_opcode).
	WROpcode = provider.WROpcode
	// SendFlags modify a send work request (IBV_SEND_*).
	SendFlags = provider.SendFlags
	// WCStatus is a completion's status (enum ibv_wc_status); String is
	// libibverbs' ibv_wc_status_str.
	WCStatus = provider.WCStatus
	// WCOpcode is the operation a completion reports (enum ibv_wc_opcode);
	// receive-side values have bit 7 set (WCRecv).
	WCOpcode = provider.WCOpcode
	// WCFlags qualify a completion (enum ibv_wc_flags).
	WCFlags = provider.WCFlags
	// QPType is a queue pair's transport service: QPTypeRC (reliable
	// connected), QPTypeUC (unreliable connected), QPTypeUD (unreliable
	// datagram).
	QPType = provider.QPType
	// QPCap is a queue pair's capacities (struct ibv_qp_cap): work
	// requests and SGEs per request on each queue, and the bytes a
	// SendInline request may carry.
	//
	//	type QPCap struct {
	//		MaxSendWR, MaxRecvWR   uint32
	//		MaxSendSGE, MaxRecvSGE uint32
	//		MaxInlineData          uint32
	//	}
	QPCap = provider.QPCap
	// QPState is a queue pair's state (enum ibv_qp_state): RESET → INIT →
	// RTR (ready to receive) → RTS (ready to send); SQD (send queue
	// drained), SQE (send queue error), ERR (every request flushed).
	QPState = provider.QPState
)

// Send work request opcodes (IBV_WR_*).
const (
	WRRDMAWrite         = provider.WRRDMAWrite         // write SGL to the peer's RemoteAddr/RKey
	WRRDMAWriteWithImm  = provider.WRRDMAWriteWithImm  // the same, consuming a receive at the peer with Imm
	WRSend              = provider.WRSend              // send SGL into the peer's next receive
	WRSendWithImm       = provider.WRSendWithImm       // the same, with Imm
	WRRDMARead          = provider.WRRDMARead          // read the peer's RemoteAddr/RKey into SGL
	WRAtomicCmpAndSwp   = provider.WRAtomicCmpAndSwp   // 8 bytes at RemoteAddr: if == CompareAdd, = Swap; old value into SGL
	WRAtomicFetchAndAdd = provider.WRAtomicFetchAndAdd // 8 bytes at RemoteAddr += CompareAdd; old value into SGL
	WRLocalInv          = provider.WRLocalInv          // invalidate InvalidateRKey locally
	WRBindMW            = provider.WRBindMW            // bind a memory window (Bind)
	WRSendWithInv       = provider.WRSendWithInv       // send, invalidating InvalidateRKey at the peer
)

// Send flags (IBV_SEND_*).
const (
	SendFence     = provider.SendFence     // wait for prior RDMA reads and atomics
	SendSignaled  = provider.SendSignaled  // produce a completion even if the QP does not signal all
	SendSolicited = provider.SendSolicited // set the solicited-event bit at the receiver
	SendInline    = provider.SendInline    // copy the SGL's bytes into the request; no LKey needed
)

// Completion statuses (IBV_WC_*).
const (
	WCSuccess          = provider.WCSuccess
	WCLocLenErr        = provider.WCLocLenErr  // a receive too small, or a send too long
	WCLocQPOpErr       = provider.WCLocQPOpErr // a request the QP cannot do
	WCLocEECOpErr      = provider.WCLocEECOpErr
	WCLocProtErr       = provider.WCLocProtErr // an SGE outside its MR, or a bad LKey
	WCWRFlushErr       = provider.WCWRFlushErr // flushed: the QP went to ERR
	WCMWBindErr        = provider.WCMWBindErr
	WCBadRespErr       = provider.WCBadRespErr
	WCLocAccessErr     = provider.WCLocAccessErr
	WCRemInvReqErr     = provider.WCRemInvReqErr // the peer found the request invalid
	WCRemAccessErr     = provider.WCRemAccessErr // the peer refused the RKey or range
	WCRemOpErr         = provider.WCRemOpErr
	WCRetryExcErr      = provider.WCRetryExcErr    // no ACK after RetryCnt retries
	WCRNRRetryExcErr   = provider.WCRNRRetryExcErr // the peer had no receive posted after RNRRetry retries
	WCLocRDDViolErr    = provider.WCLocRDDViolErr
	WCRemInvRDReqErr   = provider.WCRemInvRDReqErr
	WCRemAbortErr      = provider.WCRemAbortErr
	WCInvEECNErr       = provider.WCInvEECNErr
	WCInvEECStateErr   = provider.WCInvEECStateErr
	WCFatalErr         = provider.WCFatalErr
	WCRespTimeoutErr   = provider.WCRespTimeoutErr
	WCGeneralErr       = provider.WCGeneralErr
	WCTMErr            = provider.WCTMErr
	WCTMRndvIncomplete = provider.WCTMRndvIncomplete
)

// Completion opcodes (IBV_WC_*).
const (
	WCSend            = provider.WCSend
	WCRDMAWrite       = provider.WCRDMAWrite
	WCRDMARead        = provider.WCRDMARead
	WCCompSwap        = provider.WCCompSwap
	WCFetchAdd        = provider.WCFetchAdd
	WCBindMW          = provider.WCBindMW
	WCLocalInv        = provider.WCLocalInv
	WCRecv            = provider.WCRecv            // a receive (a send or an RDMA write with immediate arrived)
	WCRecvRDMAWithImm = provider.WCRecvRDMAWithImm // a receive consumed by an RDMA write with immediate
)

// Completion flags (IBV_WC_*).
const (
	WCWithGRH  = provider.WCWithGRH  // UD receives: the first 40 bytes of the buffer are the GRH
	WCWithImm  = provider.WCWithImm  // Imm holds immediate data
	WCIPCSumOK = provider.WCIPCSumOK // the device checked the IP checksum
	WCWithInv  = provider.WCWithInv  // Imm holds the rkey the sender invalidated
)

// QP types (IBV_QPT_*).
const (
	QPTypeRC = provider.QPTypeRC // reliable connected
	QPTypeUC = provider.QPTypeUC // unreliable connected
	QPTypeUD = provider.QPTypeUD // unreliable datagram
	// QPTypeXRCIni is an XRC initiator (IBV_QPT_XRC_SEND): PD.CreateQP.
	QPTypeXRCIni = provider.QPTypeXRCIni
	// QPTypeXRCTgt is an XRC target (IBV_QPT_XRC_RECV): XRCD.CreateTargetQP.
	QPTypeXRCTgt = provider.QPTypeXRCTgt
)

// QP states (IBV_QPS_*).
const (
	QPStateReset = provider.QPStateReset
	QPStateInit  = provider.QPStateInit
	QPStateRTR   = provider.QPStateRTR // ready to receive
	QPStateRTS   = provider.QPStateRTS // ready to send
	QPStateSQD   = provider.QPStateSQD // send queue drained
	QPStateSQE   = provider.QPStateSQE // send queue error
	QPStateErr   = provider.QPStateErr // error: every request is flushed
)
