package model

// The model decodes WQEs and writes CQEs with its own offsets, taken from
// the layouts <infiniband/mlx5dv.h> documents (struct mlx5_wqe_*_seg,
// mlx5_cqe64, mlx5_err_cqe) and never from the provider's encoder;
// layout_test.go checks each against the C layout gcc reported.
const (
	bb = 64 // one send WQE basic block

	// control segment
	wCtrlOpcode = 0 // opmod<<24 | wqe_index<<8 | opcode
	wCtrlQpnDs  = 4 // qpn<<8 | ds
	wCtrlFm     = 11
	wCtrlImm    = 12
	wSeg        = 16

	// remote address segment
	wRaddr = 0
	wRkey  = 8

	// atomic segment
	wSwapAdd = 0
	wCompare = 8

	// data segment
	wByteCount = 0
	wLkey      = 4
	wAddr      = 8

	// address vector (UD datagram segment), 48 bytes
	wAVQkey     = 0
	wAVDqp      = 8
	wAVStatSL   = 12
	wAVRlid     = 14
	wAVTclass   = 26
	wAVHopLimit = 27
	wAVGrhFl    = 28
	wAVRgid     = 32
	wAVSize     = 48

	// SRQ next segment
	wSRQNext = 2

	// CQE (64 bytes)
	cMlPath     = 17
	cSlid       = 22
	cFlagsRqpn  = 24
	cSrqnUidx   = 32
	cImm        = 36
	cByteCnt    = 44
	cTimestamp  = 48
	cSopDropQpn = 56
	cWqeCounter = 60
	cOpOwn      = 63
	cVendorErr  = 54 // error CQE
	cSyndrome   = 55 // error CQE
	cqe64       = 64
)

// WQE opcodes, control flags and CQE opcodes and syndromes (mlx5dv.h).
const (
	opSendInv  = 0x01
	opWrite    = 0x08
	opWriteImm = 0x09
	opSend     = 0x0a
	opSendImm  = 0x0b
	opRead     = 0x10
	opCS       = 0x11
	opFA       = 0x12

	fmCQUpdate  = 0x08
	fmSolicited = 0x02
	fmFence     = 0x80

	inlineBit   = 0x80000000
	invalidLKey = 0x100

	cqeReq        = 0
	cqeRespWrImm  = 1
	cqeRespSend   = 2
	cqeRespSendIm = 3
	cqeRespSendIv = 4
	cqeResize     = 5
	cqeReqErr     = 13
	cqeRespErr    = 14
	cqeInvalid    = 15

	synLocalLen     = 0x01
	synLocalQPOp    = 0x02
	synLocalProt    = 0x04
	synFlush        = 0x05
	synRemoteInvReq = 0x12
	synRemoteAccess = 0x13
	synRemoteOp     = 0x14
	synRetryExc     = 0x15
	synRNRRetryExc  = 0x16
)

// Doorbell geometry: a UAR is 4 KiB; its CQ arm register is at 0x20 and its
// two BlueFlame registers at 0x800 and 0x800 + bf_reg_size, each used in
// alternating halves.
const (
	uarSize    = 4096
	uarCQArm   = 0x20
	uarBFReg   = 0x800
	bfRegSize  = 512
	bfPerUAR   = 2
	armSolBit  = 1 << 24
	dbRecRecv  = 0
	dbRecSend  = 4
	dbRecSetCI = 0
	dbRecArm   = 4
)
