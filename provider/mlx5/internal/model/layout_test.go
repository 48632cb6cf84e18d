package model

import (
	"testing"

	"github.com/goverbs/goverbs/provider/mlx5/internal/mlx5dv"
)

// TestModelOffsets checks the model's own offsets against the C layout of
// <infiniband/mlx5dv.h>.
func TestModelOffsets(t *testing.T) {
	for _, c := range []struct {
		s, m string
		off  int
	}{
		{"mlx5_wqe_ctrl_seg", "opmod_idx_opcode", wCtrlOpcode},
		{"mlx5_wqe_ctrl_seg", "qpn_ds", wCtrlQpnDs},
		{"mlx5_wqe_ctrl_seg", "fm_ce_se", wCtrlFm},
		{"mlx5_wqe_ctrl_seg", "imm", wCtrlImm},
		{"mlx5_wqe_raddr_seg", "raddr", wRaddr},
		{"mlx5_wqe_raddr_seg", "rkey", wRkey},
		{"mlx5_wqe_atomic_seg", "swap_add", wSwapAdd},
		{"mlx5_wqe_atomic_seg", "compare", wCompare},
		{"mlx5_wqe_data_seg", "byte_count", wByteCount},
		{"mlx5_wqe_data_seg", "lkey", wLkey},
		{"mlx5_wqe_data_seg", "addr", wAddr},
		{"mlx5_wqe_av", "key.qkey.qkey", wAVQkey},
		{"mlx5_wqe_av", "dqp_dct", wAVDqp},
		{"mlx5_wqe_av", "stat_rate_sl", wAVStatSL},
		{"mlx5_wqe_av", "rlid", wAVRlid},
		{"mlx5_wqe_av", "tclass", wAVTclass},
		{"mlx5_wqe_av", "hop_limit", wAVHopLimit},
		{"mlx5_wqe_av", "grh_gid_fl", wAVGrhFl},
		{"mlx5_wqe_av", "rgid", wAVRgid},
		{"mlx5_wqe_srq_next_seg", "next_wqe_index", wSRQNext},
		{"mlx5_cqe64", "ml_path", cMlPath},
		{"mlx5_cqe64", "slid", cSlid},
		{"mlx5_cqe64", "flags_rqpn", cFlagsRqpn},
		{"mlx5_cqe64", "srqn_uidx", cSrqnUidx},
		{"mlx5_cqe64", "imm_inval_pkey", cImm},
		{"mlx5_cqe64", "byte_cnt", cByteCnt},
		{"mlx5_cqe64", "timestamp", cTimestamp},
		{"mlx5_cqe64", "sop_drop_qpn", cSopDropQpn},
		{"mlx5_cqe64", "wqe_counter", cWqeCounter},
		{"mlx5_cqe64", "op_own", cOpOwn},
		{"mlx5_err_cqe", "vendor_err_synd", cVendorErr},
		{"mlx5_err_cqe", "syndrome", cSyndrome},
	} {
		off, _, ok := mlx5dv.Member(c.s, c.m)
		if !ok || int(off) != c.off {
			t.Errorf("%s.%s: model uses %d, C layout %d (found %v)", c.s, c.m, c.off, off, ok)
		}
	}
	if n, _ := mlx5dv.Sizeof("mlx5_wqe_av"); int(n) != wAVSize {
		t.Errorf("sizeof(mlx5_wqe_av) = %d, model uses %d", n, wAVSize)
	}
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"MLX5_OPCODE_SEND_INVAL", opSendInv, mlx5dv.MLX5_OPCODE_SEND_INVAL},
		{"MLX5_OPCODE_RDMA_WRITE", opWrite, mlx5dv.MLX5_OPCODE_RDMA_WRITE},
		{"MLX5_OPCODE_RDMA_WRITE_IMM", opWriteImm, mlx5dv.MLX5_OPCODE_RDMA_WRITE_IMM},
		{"MLX5_OPCODE_SEND", opSend, mlx5dv.MLX5_OPCODE_SEND},
		{"MLX5_OPCODE_SEND_IMM", opSendImm, mlx5dv.MLX5_OPCODE_SEND_IMM},
		{"MLX5_OPCODE_RDMA_READ", opRead, mlx5dv.MLX5_OPCODE_RDMA_READ},
		{"MLX5_OPCODE_ATOMIC_CS", opCS, mlx5dv.MLX5_OPCODE_ATOMIC_CS},
		{"MLX5_OPCODE_ATOMIC_FA", opFA, mlx5dv.MLX5_OPCODE_ATOMIC_FA},
		{"MLX5_WQE_CTRL_CQ_UPDATE", fmCQUpdate, mlx5dv.MLX5_WQE_CTRL_CQ_UPDATE},
		{"MLX5_WQE_CTRL_SOLICITED", fmSolicited, mlx5dv.MLX5_WQE_CTRL_SOLICITED},
		{"MLX5_WQE_CTRL_FENCE", fmFence, mlx5dv.MLX5_WQE_CTRL_FENCE},
		{"MLX5_INLINE_SEG", inlineBit, mlx5dv.MLX5_INLINE_SEG},
		{"MLX5_INVALID_LKEY", invalidLKey, mlx5dv.MLX5_INVALID_LKEY},
		{"MLX5_CQE_REQ", cqeReq, mlx5dv.MLX5_CQE_REQ},
		{"MLX5_CQE_RESP_WR_IMM", cqeRespWrImm, mlx5dv.MLX5_CQE_RESP_WR_IMM},
		{"MLX5_CQE_RESP_SEND", cqeRespSend, mlx5dv.MLX5_CQE_RESP_SEND},
		{"MLX5_CQE_RESP_SEND_IMM", cqeRespSendIm, mlx5dv.MLX5_CQE_RESP_SEND_IMM},
		{"MLX5_CQE_RESP_SEND_INV", cqeRespSendIv, mlx5dv.MLX5_CQE_RESP_SEND_INV},
		{"MLX5_CQE_RESIZE_CQ", cqeResize, mlx5dv.MLX5_CQE_RESIZE_CQ},
		{"MLX5_CQE_REQ_ERR", cqeReqErr, mlx5dv.MLX5_CQE_REQ_ERR},
		{"MLX5_CQE_RESP_ERR", cqeRespErr, mlx5dv.MLX5_CQE_RESP_ERR},
		{"MLX5_CQE_INVALID", cqeInvalid, mlx5dv.MLX5_CQE_INVALID},
		{"MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR", synLocalLen, mlx5dv.MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR},
		{"MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR", synLocalQPOp, mlx5dv.MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR},
		{"MLX5_CQE_SYNDROME_LOCAL_PROT_ERR", synLocalProt, mlx5dv.MLX5_CQE_SYNDROME_LOCAL_PROT_ERR},
		{"MLX5_CQE_SYNDROME_WR_FLUSH_ERR", synFlush, mlx5dv.MLX5_CQE_SYNDROME_WR_FLUSH_ERR},
		{"MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR", synRemoteInvReq, mlx5dv.MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR},
		{"MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR", synRemoteAccess, mlx5dv.MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR},
		{"MLX5_CQE_SYNDROME_REMOTE_OP_ERR", synRemoteOp, mlx5dv.MLX5_CQE_SYNDROME_REMOTE_OP_ERR},
		{"MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR", synRetryExc, mlx5dv.MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR},
		{"MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR", synRNRRetryExc, mlx5dv.MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR},
		{"MLX5_CQ_DOORBELL", uarCQArm, mlx5dv.MLX5_CQ_DOORBELL},
		{"MLX5_CQ_DB_REQ_NOT_SOL", armSolBit, mlx5dv.MLX5_CQ_DB_REQ_NOT_SOL},
		{"MLX5_SEND_WQE_BB", bb, mlx5dv.MLX5_SEND_WQE_BB},
	} {
		if c.got != c.want {
			t.Errorf("%s: model uses %#x, header says %#x", c.name, c.got, c.want)
		}
	}
}
