package mlx5dv

import "testing"

// TestLayoutTable checks every generated Go struct against the C layout gcc
// reported for <infiniband/mlx5dv.h>: size, and each member's offset and size.
func TestLayoutTable(t *testing.T) {
	if len(StructLayouts) == 0 {
		t.Fatal("StructLayouts is empty")
	}
	for _, l := range StructLayouts {
		typ := layoutGoTypes[l.GoName]
		if typ == nil {
			t.Errorf("%s: no Go type", l.GoName)
			continue
		}
		if typ.Size() != l.Size {
			t.Errorf("%s: Go size %d, C sizeof %d", l.GoName, typ.Size(), l.Size)
		}
		for _, m := range l.Fields {
			if m.GoName == "" {
				continue // inside a union byte array
			}
			f, ok := typ.FieldByName(m.GoName)
			if !ok {
				t.Errorf("%s: no Go field %s for C %s", l.GoName, m.GoName, m.CName)
				continue
			}
			if f.Offset != m.Offset || f.Type.Size() != m.Size {
				t.Errorf("%s.%s: Go [%d,+%d), C %s [%d,+%d)", l.GoName, m.GoName, f.Offset, f.Type.Size(), m.CName, m.Offset, m.Size)
			}
		}
	}
}

// TestDocumentedOffsets spot-checks the table against the offsets written
// down independently in ABI-NOTES.md §4.
func TestDocumentedOffsets(t *testing.T) {
	for _, c := range []struct {
		s, m      string
		off, size uintptr
	}{
		{"mlx5_wqe_ctrl_seg", "opmod_idx_opcode", 0, 4},
		{"mlx5_wqe_ctrl_seg", "qpn_ds", 4, 4},
		{"mlx5_wqe_ctrl_seg", "signature", 8, 1},
		{"mlx5_wqe_ctrl_seg", "fm_ce_se", 11, 1},
		{"mlx5_wqe_ctrl_seg", "imm", 12, 4},
		{"mlx5_wqe_raddr_seg", "raddr", 0, 8},
		{"mlx5_wqe_raddr_seg", "rkey", 8, 4},
		{"mlx5_wqe_atomic_seg", "swap_add", 0, 8},
		{"mlx5_wqe_atomic_seg", "compare", 8, 8},
		{"mlx5_wqe_data_seg", "byte_count", 0, 4},
		{"mlx5_wqe_data_seg", "lkey", 4, 4},
		{"mlx5_wqe_data_seg", "addr", 8, 8},
		{"mlx5_cqe64", "flags_rqpn", 24, 4},
		{"mlx5_cqe64", "srqn_uidx", 32, 4},
		{"mlx5_cqe64", "imm_inval_pkey", 36, 4},
		{"mlx5_cqe64", "byte_cnt", 44, 4},
		{"mlx5_cqe64", "timestamp", 48, 8},
		{"mlx5_cqe64", "sop_drop_qpn", 56, 4},
		{"mlx5_cqe64", "wqe_counter", 60, 2},
		{"mlx5_cqe64", "op_own", 63, 1},
		{"mlx5_err_cqe", "vendor_err_synd", 54, 1},
		{"mlx5_err_cqe", "syndrome", 55, 1},
	} {
		off, size, ok := Member(c.s, c.m)
		if !ok || off != c.off || size != c.size {
			t.Errorf("%s.%s: table [%d,+%d) (found %v), ABI-NOTES [%d,+%d)", c.s, c.m, off, size, ok, c.off, c.size)
		}
	}
	if n, _ := Sizeof("mlx5_wqe_av"); n != 48 {
		t.Errorf("sizeof(mlx5_wqe_av) = %d, ABI-NOTES says 48", n)
	}
}
