package mlx5

import "github.com/goverbs/goverbs/provider/mlx5/internal/mlx5dv"

// Offsets into WQE segments and CQEs (<infiniband/mlx5dv.h>; every field is
// big-endian). layout_test.go checks each one against the C layout table
// generated into internal/mlx5dv.
const (
	wqeBB    = mlx5dv.MLX5_SEND_WQE_BB // one send WQE basic block
	wqeShift = mlx5dv.MLX5_SEND_WQE_SHIFT
	segSize  = 16 // WQE segments come in 16-byte units (the DS count)

	// struct mlx5_wqe_ctrl_seg
	ctrlOpmodIdxOpcode = 0
	ctrlQpnDs          = 4
	ctrlSignature      = 8
	ctrlFmCeSe         = 11
	ctrlImm            = 12
	ctrlSize           = 16

	// struct mlx5_wqe_raddr_seg
	raddrRaddr = 0
	raddrRkey  = 8
	raddrSize  = 16

	// struct mlx5_wqe_atomic_seg
	atomicSwapAdd = 0
	atomicCompare = 8
	atomicSize    = 16

	// struct mlx5_wqe_data_seg
	dataByteCount = 0
	dataLkey      = 4
	dataAddr      = 8
	dataSize      = 16
	dataShift     = 4 // log2(dataSize)

	// struct mlx5_wqe_inl_data_seg: a byte count, then the bytes.
	inlByteCount = 0
	inlHdrSize   = 4

	// struct mlx5_wqe_av (the datagram segment of a UD WQE)
	avQkey       = 0
	avDqpDct     = 8
	avStatRateSl = 12
	avFlMlid     = 13
	avRlid       = 14
	avRmac       = 20
	avTclass     = 26
	avHopLimit   = 27
	avGrhGidFl   = 28
	avRgid       = 32
	avSize       = 48

	// struct mlx5_wqe_umr_ctrl_seg (memory-window binds and invalidations)
	umrFlags        = 0
	umrKlmOctowords = 4
	umrMkeyMask     = 8
	umrCtrlSize     = 48

	// struct mlx5_wqe_mkey_context_seg
	mkeyFree        = 0
	mkeyAccessFlags = 2
	mkeyQpnMkey     = 4
	mkeyStartAddr   = 16
	mkeyLen         = 24
	mkeyCtxSize     = 64

	// struct mlx5_wqe_umr_klm_seg; rdma-core writes the one KLM of a bind
	// in a 64-byte block (an octoword holds 4 KLMs: get_klm_octo(1) = 4),
	// the rest zero.
	klmByteCount = 0
	klmMkey      = 4
	klmAddress   = 8
	klmBlockSize = 64

	// struct mlx5_wqe_srq_next_seg
	srqNextWqeIndex = 2
	srqNextSize     = 16

	// struct mlx5_cqe64
	cqeMlPath       = 17
	cqeSlid         = 22
	cqeFlagsRqpn    = 24
	cqeSrqnUidx     = 32
	cqeImmInvalPkey = 36
	cqeByteCnt      = 44
	cqeTimestamp    = 48
	cqeSopDropQpn   = 56
	cqeWqeCounter   = 60
	cqeOpOwn        = 63
	cqe64Size       = 64

	// struct mlx5_err_cqe
	errCqeVendorErrSynd = 54
	errCqeSyndrome      = 55
)

// Values from <infiniband/mlx5dv.h>.
const (
	opNop         = mlx5dv.MLX5_OPCODE_NOP
	opSendInval   = mlx5dv.MLX5_OPCODE_SEND_INVAL
	opRDMAWrite   = mlx5dv.MLX5_OPCODE_RDMA_WRITE
	opRDMAWriteIm = mlx5dv.MLX5_OPCODE_RDMA_WRITE_IMM
	opSend        = mlx5dv.MLX5_OPCODE_SEND
	opSendImm     = mlx5dv.MLX5_OPCODE_SEND_IMM
	opRDMARead    = mlx5dv.MLX5_OPCODE_RDMA_READ
	opAtomicCS    = mlx5dv.MLX5_OPCODE_ATOMIC_CS
	opAtomicFA    = mlx5dv.MLX5_OPCODE_ATOMIC_FA
	opUMR         = mlx5dv.MLX5_OPCODE_UMR

	ctrlCQUpdate   = mlx5dv.MLX5_WQE_CTRL_CQ_UPDATE
	ctrlSolicited  = mlx5dv.MLX5_WQE_CTRL_SOLICITED
	ctrlFence      = mlx5dv.MLX5_WQE_CTRL_FENCE
	ctrlSmallFence = mlx5dv.MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE

	umrFlagInline      = mlx5dv.MLX5_WQE_UMR_CTRL_FLAG_INLINE
	umrFlagCheckFree   = mlx5dv.MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE
	umrFlagTransOff    = mlx5dv.MLX5_WQE_UMR_CTRL_FLAG_TRNSLATION_OFFSET
	umrFlagCheckQPN    = mlx5dv.MLX5_WQE_UMR_CTRL_FLAG_CHECK_QPN
	umrMaskLen         = mlx5dv.MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN
	umrMaskStartAddr   = mlx5dv.MLX5_WQE_UMR_CTRL_MKEY_MASK_START_ADDR
	umrMaskMkey        = mlx5dv.MLX5_WQE_UMR_CTRL_MKEY_MASK_MKEY
	umrMaskQPN         = mlx5dv.MLX5_WQE_UMR_CTRL_MKEY_MASK_QPN
	umrMaskLocalWrite  = mlx5dv.MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_LOCAL_WRITE
	umrMaskRemoteRead  = mlx5dv.MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_READ
	umrMaskRemoteWrite = mlx5dv.MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_WRITE
	umrMaskAtomic      = mlx5dv.MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_ATOMIC
	umrMaskFree        = mlx5dv.MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE
	mkeyCtxFree        = mlx5dv.MLX5_WQE_MKEY_CONTEXT_FREE
	mkeyAccLocalWrite  = mlx5dv.MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_WRITE
	mkeyAccRemoteRead  = mlx5dv.MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_READ
	mkeyAccRemoteWrite = mlx5dv.MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE
	mkeyAccAtomic      = mlx5dv.MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_ATOMIC

	inlineSeg     = mlx5dv.MLX5_INLINE_SEG
	invalidLKey   = mlx5dv.MLX5_INVALID_LKEY
	extendedUDAV  = mlx5dv.MLX5_EXTENDED_UD_AV
	cqDoorbellOff = mlx5dv.MLX5_CQ_DOORBELL // the CQ arm register in a UAR page
	cqArmSol      = mlx5dv.MLX5_CQ_DB_REQ_NOT_SOL

	cqeReq        = mlx5dv.MLX5_CQE_REQ
	cqeRespWrImm  = mlx5dv.MLX5_CQE_RESP_WR_IMM
	cqeRespSend   = mlx5dv.MLX5_CQE_RESP_SEND
	cqeRespSendIm = mlx5dv.MLX5_CQE_RESP_SEND_IMM
	cqeRespSendIv = mlx5dv.MLX5_CQE_RESP_SEND_INV
	cqeReqErr     = mlx5dv.MLX5_CQE_REQ_ERR
	cqeRespErr    = mlx5dv.MLX5_CQE_RESP_ERR
	cqeInvalid    = mlx5dv.MLX5_CQE_INVALID
	cqeResize     = mlx5dv.MLX5_CQE_RESIZE_CQ
	cqeOwnerMask  = mlx5dv.MLX5_CQE_OWNER_MASK
)

// UAR (doorbell page) geometry, from the kernel's mlx5 driver
// (include/linux/mlx5/device.h and driver.h; not in any uapi header): a
// UAR is 4 KiB, its two non-fast-path BlueFlame registers start at 0x800.
const (
	uarSize         = 4096 // MLX5_ADAPTER_PAGE_SIZE
	bfRegsPerUAR    = 2    // MLX5_NON_FP_BFREGS_PER_UAR
	bfRegOffset     = 0x800
	mmapCmdShift    = 8 // MLX5_IB_MMAP_CMD_SHIFT: mmap offset (in pages) = cmd<<8 | index
	mmapIndexMask   = 0xff
	mmapExtIdxShift = 16 // index bits above 8 go here (MLX5_IB_EXTENDED_MMAP_INDEX)
)

// Doorbell record words (big-endian 32-bit), by index.
const (
	cqDBSetCI = 0 // CQ: consumer index
	cqDBArm   = 1 // CQ: arm command
	qpDBRecv  = 0 // QP/SRQ: receive counter
	qpDBSend  = 1 // QP: send counter
	dbRecSize = 8
)
