package rxe

import (
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// TestWCLayout checks what wcView relies on: provider.WorkCompletion has
// ib_uverbs_wc's field offsets and sizes, so toWC's one copy puts every
// kernel field in its place.
func TestWCLayout(t *testing.T) {
	var w provider.WorkCompletion
	var k abi.IbUverbsWc
	fields := []struct {
		name         string
		wOff, kOff   uintptr
		wSize, kSize uintptr
	}{
		{"ID/wr_id", unsafe.Offsetof(w.ID), unsafe.Offsetof(k.WrId), unsafe.Sizeof(w.ID), unsafe.Sizeof(k.WrId)},
		{"Status/status", unsafe.Offsetof(w.Status), unsafe.Offsetof(k.Status), unsafe.Sizeof(w.Status), unsafe.Sizeof(k.Status)},
		{"Opcode/opcode", unsafe.Offsetof(w.Opcode), unsafe.Offsetof(k.Opcode), unsafe.Sizeof(w.Opcode), unsafe.Sizeof(k.Opcode)},
		{"VendorErr/vendor_err", unsafe.Offsetof(w.VendorErr), unsafe.Offsetof(k.VendorErr), unsafe.Sizeof(w.VendorErr), unsafe.Sizeof(k.VendorErr)},
		{"ByteLen/byte_len", unsafe.Offsetof(w.ByteLen), unsafe.Offsetof(k.ByteLen), unsafe.Sizeof(w.ByteLen), unsafe.Sizeof(k.ByteLen)},
		{"Imm/ex", unsafe.Offsetof(w.Imm), unsafe.Offsetof(k.Ex), unsafe.Sizeof(w.Imm), unsafe.Sizeof(k.Ex)},
		{"QPNum/qp_num", unsafe.Offsetof(w.QPNum), unsafe.Offsetof(k.QpNum), unsafe.Sizeof(w.QPNum), unsafe.Sizeof(k.QpNum)},
		{"SrcQP/src_qp", unsafe.Offsetof(w.SrcQP), unsafe.Offsetof(k.SrcQp), unsafe.Sizeof(w.SrcQP), unsafe.Sizeof(k.SrcQp)},
		{"Flags/wc_flags", unsafe.Offsetof(w.Flags), unsafe.Offsetof(k.WcFlags), unsafe.Sizeof(w.Flags), unsafe.Sizeof(k.WcFlags)},
		{"PKeyIndex/pkey_index", unsafe.Offsetof(w.PKeyIndex), unsafe.Offsetof(k.PkeyIndex), unsafe.Sizeof(w.PKeyIndex), unsafe.Sizeof(k.PkeyIndex)},
		{"SLID/slid", unsafe.Offsetof(w.SLID), unsafe.Offsetof(k.Slid), unsafe.Sizeof(w.SLID), unsafe.Sizeof(k.Slid)},
		{"SL/sl", unsafe.Offsetof(w.SL), unsafe.Offsetof(k.Sl), unsafe.Sizeof(w.SL), unsafe.Sizeof(k.Sl)},
		{"DLIDPathBits/dlid_path_bits", unsafe.Offsetof(w.DLIDPathBits), unsafe.Offsetof(k.DlidPathBits), unsafe.Sizeof(w.DLIDPathBits), unsafe.Sizeof(k.DlidPathBits)},
		{"Port/port_num", unsafe.Offsetof(w.Port), unsafe.Offsetof(k.PortNum), unsafe.Sizeof(w.Port), unsafe.Sizeof(k.PortNum)},
	}
	for _, f := range fields {
		if f.wOff != f.kOff || f.wSize != f.kSize {
			t.Errorf("%s: offset %d, size %d in WorkCompletion; offset %d, size %d in ib_uverbs_wc", f.name, f.wOff, f.wSize, f.kOff, f.kSize)
		}
	}
	if unsafe.Sizeof(w) != unsafe.Sizeof(k) {
		t.Errorf("WorkCompletion is %d bytes, ib_uverbs_wc %d", unsafe.Sizeof(w), unsafe.Sizeof(k))
	}
}
