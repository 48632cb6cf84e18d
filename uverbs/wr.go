package uverbs

import "github.com/goverbs/goverbs/provider"

// The work-request and completion types live in package provider, below
// both uverbs and the providers; these aliases are their public names.
type (
	// SGE is one scatter/gather element.
	SGE = provider.SGE
	// SendWR is a send work request.
	SendWR = provider.SendWR
	// RecvWR is a receive work request.
	RecvWR = provider.RecvWR
	// UDDest addresses a UD send.
	UDDest = provider.UDDest
	// MWBind is what a BIND_MW work request binds.
	MWBind = provider.MWBind
	// WorkCompletion is one completion (struct ibv_wc).
	WorkCompletion = provider.WorkCompletion
	// WROpcode is a send work request's operation.
	WROpcode = provider.WROpcode
	// SendFlags modify a send work request.
	SendFlags = provider.SendFlags
	// WCStatus is a completion's status.
	WCStatus = provider.WCStatus
	// WCOpcode is the operation a completion reports.
	WCOpcode = provider.WCOpcode
	// WCFlags qualify a completion.
	WCFlags = provider.WCFlags
	// QPType is a queue pair's transport service.
	QPType = provider.QPType
	// QPCap is a queue pair's capacities.
	QPCap = provider.QPCap
	// QPState is a queue pair's state.
	QPState = provider.QPState
)

// Re-exported constants; see package provider for their documentation.
const (
	WRRDMAWrite         = provider.WRRDMAWrite
	WRRDMAWriteWithImm  = provider.WRRDMAWriteWithImm
	WRSend              = provider.WRSend
	WRSendWithImm       = provider.WRSendWithImm
	WRRDMARead          = provider.WRRDMARead
	WRAtomicCmpAndSwp   = provider.WRAtomicCmpAndSwp
	WRAtomicFetchAndAdd = provider.WRAtomicFetchAndAdd
	WRLocalInv          = provider.WRLocalInv
	WRBindMW            = provider.WRBindMW
	WRSendWithInv       = provider.WRSendWithInv

	SendFence     = provider.SendFence
	SendSignaled  = provider.SendSignaled
	SendSolicited = provider.SendSolicited
	SendInline    = provider.SendInline

	WCSuccess        = provider.WCSuccess
	WCLocLenErr      = provider.WCLocLenErr
	WCLocQPOpErr     = provider.WCLocQPOpErr
	WCLocProtErr     = provider.WCLocProtErr
	WCWRFlushErr     = provider.WCWRFlushErr
	WCLocAccessErr   = provider.WCLocAccessErr
	WCRemInvReqErr   = provider.WCRemInvReqErr
	WCRemAccessErr   = provider.WCRemAccessErr
	WCRemOpErr       = provider.WCRemOpErr
	WCRetryExcErr    = provider.WCRetryExcErr
	WCRNRRetryExcErr = provider.WCRNRRetryExcErr
	WCFatalErr       = provider.WCFatalErr
	WCGeneralErr     = provider.WCGeneralErr

	WCSend            = provider.WCSend
	WCRDMAWrite       = provider.WCRDMAWrite
	WCRDMARead        = provider.WCRDMARead
	WCCompSwap        = provider.WCCompSwap
	WCFetchAdd        = provider.WCFetchAdd
	WCBindMW          = provider.WCBindMW
	WCLocalInv        = provider.WCLocalInv
	WCRecv            = provider.WCRecv
	WCRecvRDMAWithImm = provider.WCRecvRDMAWithImm

	WCWithGRH = provider.WCWithGRH
	WCWithImm = provider.WCWithImm
	WCWithInv = provider.WCWithInv

	QPTypeRC = provider.QPTypeRC
	QPTypeUC = provider.QPTypeUC
	QPTypeUD = provider.QPTypeUD

	QPStateReset = provider.QPStateReset
	QPStateInit  = provider.QPStateInit
	QPStateRTR   = provider.QPStateRTR
	QPStateRTS   = provider.QPStateRTS
	QPStateSQD   = provider.QPStateSQD
	QPStateSQE   = provider.QPStateSQE
	QPStateErr   = provider.QPStateErr
)
