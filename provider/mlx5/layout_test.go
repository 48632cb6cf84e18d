package mlx5

import (
	"testing"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider/mlx5/internal/mlx5dv"
)

// TestCodecOffsets checks every offset the WQE and CQE codecs use against
// the C layout gcc reported for <infiniband/mlx5dv.h>.
func TestCodecOffsets(t *testing.T) {
	for _, c := range []struct {
		s, m       string
		off, width int
	}{
		{"mlx5_wqe_ctrl_seg", "opmod_idx_opcode", ctrlOpmodIdxOpcode, 4},
		{"mlx5_wqe_ctrl_seg", "qpn_ds", ctrlQpnDs, 4},
		{"mlx5_wqe_ctrl_seg", "signature", ctrlSignature, 1},
		{"mlx5_wqe_ctrl_seg", "fm_ce_se", ctrlFmCeSe, 1},
		{"mlx5_wqe_ctrl_seg", "imm", ctrlImm, 4},
		{"mlx5_wqe_raddr_seg", "raddr", raddrRaddr, 8},
		{"mlx5_wqe_raddr_seg", "rkey", raddrRkey, 4},
		{"mlx5_wqe_atomic_seg", "swap_add", atomicSwapAdd, 8},
		{"mlx5_wqe_atomic_seg", "compare", atomicCompare, 8},
		{"mlx5_wqe_data_seg", "byte_count", dataByteCount, 4},
		{"mlx5_wqe_data_seg", "lkey", dataLkey, 4},
		{"mlx5_wqe_data_seg", "addr", dataAddr, 8},
		{"mlx5_wqe_inl_data_seg", "byte_count", inlByteCount, inlHdrSize},
		{"mlx5_wqe_av", "key.qkey.qkey", avQkey, 4},
		{"mlx5_wqe_av", "dqp_dct", avDqpDct, 4},
		{"mlx5_wqe_av", "stat_rate_sl", avStatRateSl, 1},
		{"mlx5_wqe_av", "fl_mlid", avFlMlid, 1},
		{"mlx5_wqe_av", "rlid", avRlid, 2},
		{"mlx5_wqe_av", "rmac", avRmac, 6},
		{"mlx5_wqe_av", "tclass", avTclass, 1},
		{"mlx5_wqe_av", "hop_limit", avHopLimit, 1},
		{"mlx5_wqe_av", "grh_gid_fl", avGrhGidFl, 4},
		{"mlx5_wqe_av", "rgid", avRgid, 16},
		{"mlx5_wqe_srq_next_seg", "next_wqe_index", srqNextWqeIndex, 2},
		{"mlx5_wqe_umr_ctrl_seg", "flags", umrFlags, 1},
		{"mlx5_wqe_umr_ctrl_seg", "klm_octowords", umrKlmOctowords, 2},
		{"mlx5_wqe_umr_ctrl_seg", "mkey_mask", umrMkeyMask, 8},
		{"mlx5_wqe_mkey_context_seg", "free", mkeyFree, 1},
		{"mlx5_wqe_mkey_context_seg", "access_flags", mkeyAccessFlags, 1},
		{"mlx5_wqe_mkey_context_seg", "qpn_mkey", mkeyQpnMkey, 4},
		{"mlx5_wqe_mkey_context_seg", "start_addr", mkeyStartAddr, 8},
		{"mlx5_wqe_mkey_context_seg", "len", mkeyLen, 8},
		{"mlx5_wqe_umr_klm_seg", "byte_count", klmByteCount, 4},
		{"mlx5_wqe_umr_klm_seg", "mkey", klmMkey, 4},
		{"mlx5_wqe_umr_klm_seg", "address", klmAddress, 8},
		{"mlx5_cqe64", "ml_path", cqeMlPath, 1},
		{"mlx5_cqe64", "slid", cqeSlid, 2},
		{"mlx5_cqe64", "flags_rqpn", cqeFlagsRqpn, 4},
		{"mlx5_cqe64", "srqn_uidx", cqeSrqnUidx, 4},
		{"mlx5_cqe64", "imm_inval_pkey", cqeImmInvalPkey, 4},
		{"mlx5_cqe64", "byte_cnt", cqeByteCnt, 4},
		{"mlx5_cqe64", "timestamp", cqeTimestamp, 8},
		{"mlx5_cqe64", "sop_drop_qpn", cqeSopDropQpn, 4},
		{"mlx5_cqe64", "wqe_counter", cqeWqeCounter, 2},
		{"mlx5_cqe64", "op_own", cqeOpOwn, 1},
		{"mlx5_err_cqe", "vendor_err_synd", errCqeVendorErrSynd, 1},
		{"mlx5_err_cqe", "syndrome", errCqeSyndrome, 1},
		{"mlx5_err_cqe", "srqn", cqeSrqnUidx, 4},
		{"mlx5_err_cqe", "wqe_counter", cqeWqeCounter, 2},
		{"mlx5_err_cqe", "op_own", cqeOpOwn, 1},
	} {
		off, size, ok := mlx5dv.Member(c.s, c.m)
		if !ok {
			t.Errorf("%s has no member %s", c.s, c.m)
			continue
		}
		if int(off) != c.off || int(size) != c.width {
			t.Errorf("%s.%s: codec uses [%d,+%d), C layout [%d,+%d)", c.s, c.m, c.off, c.width, off, size)
		}
	}
	for _, c := range []struct {
		s    string
		size int
	}{
		{"mlx5_wqe_ctrl_seg", ctrlSize}, {"mlx5_wqe_raddr_seg", raddrSize}, {"mlx5_wqe_atomic_seg", atomicSize},
		{"mlx5_wqe_data_seg", dataSize}, {"mlx5_wqe_av", avSize}, {"mlx5_wqe_datagram_seg", avSize},
		{"mlx5_wqe_srq_next_seg", srqNextSize}, {"mlx5_cqe64", cqe64Size}, {"mlx5_err_cqe", cqe64Size},
		{"mlx5_wqe_umr_ctrl_seg", umrCtrlSize}, {"mlx5_wqe_mkey_context_seg", mkeyCtxSize},
	} {
		if n, ok := mlx5dv.Sizeof(c.s); !ok || int(n) != c.size {
			t.Errorf("sizeof(%s) = %d (found %v), codec uses %d", c.s, n, ok, c.size)
		}
	}
}

// TestDriverStructs checks the driver data the provider exchanges against
// the sizes in ABI-NOTES §4 and the generated layout of mlx5-abi.h.
func TestDriverStructs(t *testing.T) {
	for _, c := range []struct {
		name string
		got  int
		want int
	}{
		{"mlx5_ib_alloc_ucontext_req_v2", len(abi.Bytes(&abi.Mlx5IbAllocUcontextReqV2{})), reqLenFull},
		{"mlx5_ib_alloc_ucontext_resp", len(abi.Bytes(&abi.Mlx5IbAllocUcontextResp{})), unsafeSizeofResp},
		{"mlx5_ib_create_cq", len(abi.Bytes(&abi.Mlx5IbCreateCq{})), 32},
		{"mlx5_ib_create_qp", len(abi.Bytes(&abi.Mlx5IbCreateQp{})), 56},
		{"mlx5_ib_create_qp_resp", len(abi.Bytes(&abi.Mlx5IbCreateQpResp{})), 40},
		{"mlx5_ib_create_srq", len(abi.Bytes(&abi.Mlx5IbCreateSrq{})), 32},
		{"mlx5_ib_create_ah_resp", len(abi.Bytes(&abi.Mlx5IbCreateAhResp{})), 16},
		{"mlx5_ib_alloc_pd_resp", len(abi.Bytes(&abi.Mlx5IbAllocPdResp{})), 4},
		{"mlx5_ib_alloc_mw", len(abi.Bytes(&abi.Mlx5IbAllocMw{})), 8},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d bytes, want %d", c.name, c.got, c.want)
		}
	}
	// The retry lengths are offsets into the request.
	for _, c := range []struct {
		member string
		off    int
	}{{"lib_caps", reqLenNoLibCaps}, {"max_cqe_version", reqLenNoCQEVersion}} {
		found := false
		for _, l := range abi.StructLayouts {
			if l.CName != "mlx5_ib_alloc_ucontext_req_v2" {
				continue
			}
			for _, f := range l.Fields {
				if f.CName == c.member {
					found = true
					if int(f.Offset) != c.off {
						t.Errorf("offsetof(%s) = %d, provider retries with %d", c.member, f.Offset, c.off)
					}
				}
			}
		}
		if !found {
			t.Errorf("no layout for mlx5_ib_alloc_ucontext_req_v2.%s", c.member)
		}
	}
}
