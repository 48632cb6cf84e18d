package abi

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// This file checks the generated Go structs (ztypes.go) against the C layout
// gcc reported (zlayout.go), as rdma-core's DECLARE_CMD static_asserts do, and
// spot-checks both against facts written down independently in
// ABI-NOTES.md (computed with gcc on x86-64, several observed on a 6.1 kernel).

// layoutErrors compares one Go type with its C layout and returns every
// mismatch: size, each member's offset and size, Go fields the table does not
// know, union members outside their byte array, tails inside the members.
func layoutErrors(l StructLayout, t reflect.Type) []string {
	if t == nil {
		return []string{"no Go type"}
	}
	if t.Kind() != reflect.Struct {
		return []string{fmt.Sprintf("Go type is a %s, not a struct", t.Kind())}
	}
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if t.Size() != l.Size {
		bad("Go size %d, C sizeof %d", t.Size(), l.Size)
	}
	// On 32-bit targets Go aligns uint64 to 4 where C's __aligned_u64 has 8;
	// the explicit padding keeps every offset right all the same.
	if a := uintptr(t.Align()); a != l.Align && !(strconv.IntSize == 32 && l.Align == 8 && a == 4) {
		bad("Go alignment %d, C _Alignof %d", a, l.Align)
	}
	goFields := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Name == "_" {
			// Padding is a byte array, or a zero-length array that gives
			// the type C's alignment.
			if f.Type.Kind() != reflect.Array || (f.Type.Elem().Kind() != reflect.Uint8 && f.Type.Len() != 0) {
				bad("padding field %d is %s, not a byte array", i, f.Type)
			}
			continue
		}
		goFields[f.Name] = f
	}
	checked := map[string]bool{}
	end := uintptr(0) // end of the last member with a Go field
	for _, m := range l.Fields {
		if m.GoName == "" {
			// A member inside a union: it must lie inside a byte-array field.
			inside := false
			for _, f := range goFields {
				if f.Type.Kind() == reflect.Array && f.Type.Elem().Kind() == reflect.Uint8 &&
					f.Offset <= m.Offset && m.Offset+m.Size <= f.Offset+f.Type.Size() {
					inside = true
				}
			}
			if !inside {
				bad("union member %s [%d,+%d) is in no byte-array field", m.CName, m.Offset, m.Size)
			}
			continue
		}
		f, ok := goFields[m.GoName]
		if !ok {
			bad("C member %s: no Go field %s", m.CName, m.GoName)
			continue
		}
		checked[m.GoName] = true
		if f.Offset != m.Offset {
			bad("%s (C %s): Go offset %d, C offset %d", m.GoName, m.CName, f.Offset, m.Offset)
		}
		if f.Type.Size() != m.Size {
			bad("%s (C %s): Go size %d, C size %d", m.GoName, m.CName, f.Type.Size(), m.Size)
		}
		end = max(end, m.Offset+m.Size)
	}
	for name := range goFields {
		if !checked[name] {
			bad("Go field %s matches no C member", name)
		}
	}
	for _, tl := range l.Tails {
		if tl.Offset < end || tl.Offset > l.Size || tl.ElemSize == 0 {
			bad("tail %s at %d (element %d bytes) is not past the members (end %d, sizeof %d)", tl.CName, tl.Offset, tl.ElemSize, end, l.Size)
		}
	}
	return errs
}

func TestLayoutTable(t *testing.T) {
	if len(StructLayouts) == 0 {
		t.Fatal("StructLayouts is empty")
	}
	seen := map[string]bool{}
	for _, l := range StructLayouts {
		if seen[l.GoName] {
			t.Errorf("%s listed twice", l.GoName)
		}
		seen[l.GoName] = true
		for _, e := range layoutErrors(l, layoutGoTypes[l.GoName]) {
			t.Errorf("%s (C %s): %s", l.GoName, l.CName, e)
		}
	}
	for name := range layoutGoTypes {
		if !seen[name] {
			t.Errorf("Go type %s has no layout", name)
		}
	}
}

// TestLayoutCheckFails makes sure layoutErrors notices each kind of mistake,
// so that TestLayoutTable passing means something.
func TestLayoutCheckFails(t *testing.T) {
	good := layoutOf(t, "IbUverbsCreateCq")
	typ := layoutGoTypes["IbUverbsCreateCq"]
	if errs := layoutErrors(good, typ); len(errs) != 0 {
		t.Fatalf("IbUverbsCreateCq: %v", errs)
	}
	mutate := func(name string, f func(l *StructLayout)) {
		l := good
		l.Fields = append([]FieldLayout(nil), good.Fields...)
		l.Tails = append([]TailLayout(nil), good.Tails...)
		f(&l)
		if errs := layoutErrors(l, typ); len(errs) == 0 {
			t.Errorf("%s: not detected", name)
		}
	}
	mutate("size", func(l *StructLayout) { l.Size += 8 })
	mutate("alignment", func(l *StructLayout) { l.Align = 4 })
	mutate("offset", func(l *StructLayout) { l.Fields[2].Offset += 4 })
	mutate("member size", func(l *StructLayout) { l.Fields[3].Size = 8 })
	mutate("unknown Go field", func(l *StructLayout) { l.Fields[1].GoName = "UserHandel" })
	mutate("Go field without C member", func(l *StructLayout) { l.Fields = l.Fields[:len(l.Fields)-1] })
	mutate("tail inside the members", func(l *StructLayout) { l.Tails[0].Offset = 16 })
	mutate("union member outside its array", func(l *StructLayout) {
		l.Fields = append(l.Fields, FieldLayout{CName: "x.y", Offset: 0, Size: 8})
	})
	if errs := layoutErrors(good, layoutGoTypes["IbUverbsCreateCqResp"]); len(errs) == 0 {
		t.Error("wrong Go type: not detected")
	}
}

func layoutOf(t *testing.T, goName string) StructLayout {
	t.Helper()
	for _, l := range StructLayouts {
		if l.GoName == goName {
			return l
		}
	}
	t.Fatalf("no layout for %s", goName)
	return StructLayout{}
}

// goOffset returns the offset and size of a dotted Go field path in a type.
func goOffset(t *testing.T, typ reflect.Type, path string) (off, size uintptr) {
	t.Helper()
	for _, name := range strings.Split(path, ".") {
		f, ok := typ.FieldByName(name)
		if !ok {
			t.Fatalf("%s has no field %s (path %s)", typ, name, path)
		}
		off += f.Offset
		typ = f.Type
	}
	return off, typ.Size()
}

// cMember returns a member's C offset and size from the table, by C path.
func cMember(t *testing.T, goName, cPath string) (off, size uintptr) {
	t.Helper()
	for _, f := range layoutOf(t, goName).Fields {
		if f.CName == cPath {
			return f.Offset, f.Size
		}
	}
	t.Fatalf("%s has no C member %s", goName, cPath)
	return 0, 0
}

func cTail(t *testing.T, goName, cPath string) TailLayout {
	t.Helper()
	for _, tl := range layoutOf(t, goName).Tails {
		if tl.CName == cPath {
			return tl
		}
	}
	t.Fatalf("%s has no flexible array %s", goName, cPath)
	return TailLayout{}
}

// TestABINotesSizes checks sizes written down in ABI-NOTES.md §1, §3, §4,
// and C alignments of structs whose Go alignment would otherwise be smaller.
func TestABINotesSizes(t *testing.T) {
	for _, c := range []struct {
		v    any
		size uintptr
	}{
		{IbUverbsCmdHdr{}, 8},
		{IbUverbsExCmdHdr{}, 16},
		{IbUverbsCreateCq{}, 32},
		{IbUverbsCreateQp{}, 56},
		{IbUverbsCreateQpResp{}, 32},
		{IbUverbsModifyQp{}, 112},
		{IbUverbsQueryPortResp{}, 40},
		{IbUverbsQueryPortRespEx{}, 48},
		{IbUverbsQueryDeviceResp{}, 176},
		{IbUverbsExQueryDeviceResp{}, 304},
		{IbUverbsRegMr{}, 40},
		{IbUverbsPostSend{}, 24},
		{IbUverbsWc{}, 48},
		{IbUverbsGidEntry{}, 32},
		{IbUverbsQpCap{}, 20},
		{IbUverbsIoctlHdr{}, 24},
		{IbUverbsAttr{}, 16},
		{IbUverbsAsyncEventDesc{}, 16},
		{IbUverbsCompEventDesc{}, 8},
		{IbUverbsReqNotifyCq{}, 8},
		{Mminfo{}, 16},
		{RxeCreateCqResp{}, 16},
		{RxeCreateQpResp{}, 32},
		{RxeSendWqe{}, 208},
		{RxeRecvWqe{}, 40},
		{RxeAv{}, 88},
		{RxeSge{}, 16},
		{RxeQueueBuf{}, 384},
		{SiwUrespAllocCtx{}, 8},
		{SiwUrespCreateCq{}, 16},
		{Mlx5IbAllocUcontextReqV2{}, 32},
		{Mlx5IbAllocUcontextResp{}, 72},
		{Mlx5IbCreateCq{}, 32},
		{Mlx5IbCreateQp{}, 56},
		{Mlx5IbCreateQpResp{}, 40},
	} {
		typ := reflect.TypeOf(c.v)
		if typ.Size() != c.size {
			t.Errorf("%s: %d bytes, ABI-NOTES says %d", typ.Name(), typ.Size(), c.size)
		}
		if l := layoutOf(t, typ.Name()); l.Size != c.size {
			t.Errorf("%s: C sizeof %d in the table, ABI-NOTES says %d", typ.Name(), l.Size, c.size)
		}
	}
	if strconv.IntSize == 64 {
		// The union of __aligned_u64 data and __s64 data_s64 is a byte array in
		// Go; the flexible driver_data[] of __aligned_u64 has no Go field.
		for _, typ := range []reflect.Type{reflect.TypeFor[IbUverbsAttr](), reflect.TypeFor[IbUverbsCreateCqResp](), reflect.TypeFor[RxeDmaInfo]()} {
			if typ.Align() != 8 {
				t.Errorf("%s: Go alignment %d, C has 8", typ.Name(), typ.Align())
			}
		}
	}
}

// TestABINotesOffsets checks offsets written down in ABI-NOTES.md, both in
// the Go struct and in the C table.
func TestABINotesOffsets(t *testing.T) {
	for _, c := range []struct {
		v      any
		goPath string
		off    uintptr
	}{
		// §1 ioctl header and attribute.
		{IbUverbsIoctlHdr{}, "Length", 0}, {IbUverbsIoctlHdr{}, "ObjectId", 2}, {IbUverbsIoctlHdr{}, "MethodId", 4},
		{IbUverbsIoctlHdr{}, "NumAttrs", 6}, {IbUverbsIoctlHdr{}, "Reserved1", 8}, {IbUverbsIoctlHdr{}, "DriverId", 16},
		{IbUverbsIoctlHdr{}, "Reserved2", 20},
		{IbUverbsAttr{}, "AttrId", 0}, {IbUverbsAttr{}, "Len", 2}, {IbUverbsAttr{}, "Flags", 4}, {IbUverbsAttr{}, "AttrData", 6},
		{IbUverbsQueryPortRespEx{}, "PortCapFlags2", 40},
		{IbUverbsGidEntry{}, "GidIndex", 16}, {IbUverbsGidEntry{}, "PortNum", 20}, {IbUverbsGidEntry{}, "GidType", 24},
		{IbUverbsGidEntry{}, "NetdevIfindex", 28},
		// §3 rxe: send WQE, receive WQE, CQE (ib_uverbs_wc).
		{RxeSendWqe{}, "Wr.WrId", 0}, {RxeSendWqe{}, "Wr.Reserved", 8}, {RxeSendWqe{}, "Wr.Opcode", 12},
		{RxeSendWqe{}, "Wr.SendFlags", 16}, {RxeSendWqe{}, "Wr.Ex", 20}, {RxeSendWqe{}, "Wr.Wr", 24},
		{RxeSendWqe{}, "Status", 144}, {RxeSendWqe{}, "State", 148}, {RxeSendWqe{}, "Iova", 152},
		{RxeSendWqe{}, "Mask", 160}, {RxeSendWqe{}, "FirstPsn", 164}, {RxeSendWqe{}, "LastPsn", 168},
		{RxeSendWqe{}, "AckLength", 172}, {RxeSendWqe{}, "Ssn", 176}, {RxeSendWqe{}, "HasRdAtomic", 180},
		{RxeSendWqe{}, "Dma", 184}, {RxeSendWqe{}, "Dma.Length", 184}, {RxeSendWqe{}, "Dma.Resid", 188},
		{RxeSendWqe{}, "Dma.NumSge", 196},
		{RxeRecvWqe{}, "WrId", 0}, {RxeRecvWqe{}, "Dma", 16}, {RxeRecvWqe{}, "Dma.Length", 16},
		{RxeRecvWqe{}, "Dma.Resid", 20}, {RxeRecvWqe{}, "Dma.NumSge", 28},
		{RxeQueueBuf{}, "Log2ElemSize", 0}, {RxeQueueBuf{}, "IndexMask", 4}, {RxeQueueBuf{}, "ProducerIndex", 128},
		{RxeQueueBuf{}, "ConsumerIndex", 256},
		{IbUverbsWc{}, "WrId", 0}, {IbUverbsWc{}, "Status", 8}, {IbUverbsWc{}, "Opcode", 12}, {IbUverbsWc{}, "VendorErr", 16},
		{IbUverbsWc{}, "ByteLen", 20}, {IbUverbsWc{}, "Ex", 24}, {IbUverbsWc{}, "QpNum", 28}, {IbUverbsWc{}, "SrcQp", 32},
		{IbUverbsWc{}, "WcFlags", 36}, {IbUverbsWc{}, "PkeyIndex", 40}, {IbUverbsWc{}, "Slid", 42}, {IbUverbsWc{}, "Sl", 44},
		{IbUverbsWc{}, "DlidPathBits", 45}, {IbUverbsWc{}, "PortNum", 46},
		// §4 mlx5.
		{Mlx5IbAllocUcontextResp{}, "BfRegSize", 4}, {Mlx5IbAllocUcontextResp{}, "TotBfregs", 8},
		{Mlx5IbAllocUcontextResp{}, "CacheLineSize", 12}, {Mlx5IbAllocUcontextResp{}, "MaxSqDescSz", 16},
		{Mlx5IbAllocUcontextResp{}, "MaxRqDescSz", 18}, {Mlx5IbAllocUcontextResp{}, "MaxSendWqebb", 20},
		{Mlx5IbAllocUcontextResp{}, "MaxRecvWr", 24}, {Mlx5IbAllocUcontextResp{}, "NumPorts", 32},
		{Mlx5IbAllocUcontextResp{}, "CompMask", 36}, {Mlx5IbAllocUcontextResp{}, "CqeVersion", 44},
		{Mlx5IbAllocUcontextResp{}, "EthMinInline", 46}, {Mlx5IbAllocUcontextResp{}, "HcaCoreClockOffset", 48},
		{Mlx5IbAllocUcontextResp{}, "LogUarSize", 56}, {Mlx5IbAllocUcontextResp{}, "NumUarsPerPage", 60},
		{Mlx5IbAllocUcontextResp{}, "NumDynBfregs", 64},
		{Mlx5IbAllocUcontextReqV2{}, "MaxCqeVersion", 16}, {Mlx5IbAllocUcontextReqV2{}, "LibCaps", 24},
		{Mlx5IbCreateCq{}, "BufAddr", 0}, {Mlx5IbCreateCq{}, "DbAddr", 8}, {Mlx5IbCreateCq{}, "CqeSize", 16},
		{Mlx5IbCreateCq{}, "CqeCompEn", 20}, {Mlx5IbCreateCq{}, "CqeCompResFormat", 21}, {Mlx5IbCreateCq{}, "Flags", 22},
		{Mlx5IbCreateCq{}, "UarPageIndex", 24},
		{Mlx5IbCreateQp{}, "BufAddr", 0}, {Mlx5IbCreateQp{}, "DbAddr", 8}, {Mlx5IbCreateQp{}, "SqWqeCount", 16},
		{Mlx5IbCreateQp{}, "RqWqeCount", 20}, {Mlx5IbCreateQp{}, "RqWqeShift", 24}, {Mlx5IbCreateQp{}, "Flags", 28},
		{Mlx5IbCreateQp{}, "Uidx", 32}, {Mlx5IbCreateQp{}, "BfregIndex", 36}, {Mlx5IbCreateQp{}, "EceOptions", 48},
		{Mlx5IbCreateQpResp{}, "BfregIndex", 0},
	} {
		typ := reflect.TypeOf(c.v)
		if off, _ := goOffset(t, typ, c.goPath); off != c.off {
			t.Errorf("%s.%s at %d, ABI-NOTES says %d", typ.Name(), c.goPath, off, c.off)
		}
		if !strings.Contains(c.goPath, ".") {
			f, _ := typ.FieldByName(c.goPath)
			for _, m := range layoutOf(t, typ.Name()).Fields {
				if m.GoName == f.Name && m.Offset != c.off {
					t.Errorf("%s (C %s) at %d in the table, ABI-NOTES says %d", typ.Name(), m.CName, m.Offset, c.off)
				}
			}
		}
	}
}

// TestABINotesUnionsAndTails checks union members and flexible arrays, which
// have no Go field of their own, through the table and the accessors.
func TestABINotesUnionsAndTails(t *testing.T) {
	for _, c := range []struct {
		goName, cPath string
		off, size     uintptr
	}{
		// §3: rdma {raddr@24, rkey@32}; atomic {raddr@24, compare_add@32, swap@40, rkey@48};
		// ud {qpn@24, qkey@28, pkey@32, ah_num@36, av@56 (88 B)}; relative to rxe_send_wqe,
		// whose wr is at 0.
		{"RxeSendWr", "wr.rdma.remote_addr", 24, 8}, {"RxeSendWr", "wr.rdma.rkey", 32, 4},
		{"RxeSendWr", "wr.atomic.remote_addr", 24, 8}, {"RxeSendWr", "wr.atomic.compare_add", 32, 8},
		{"RxeSendWr", "wr.atomic.swap", 40, 8}, {"RxeSendWr", "wr.atomic.rkey", 48, 4},
		{"RxeSendWr", "wr.ud.remote_qpn", 24, 4}, {"RxeSendWr", "wr.ud.remote_qkey", 28, 4},
		{"RxeSendWr", "wr.ud.pkey_index", 32, 2}, {"RxeSendWr", "wr.ud.ah_num", 36, 4},
		{"RxeSendWr", "wr.ud.av", 56, 88}, {"RxeSendWr", "ex.imm_data", 20, 4},
		{"IbUverbsWc", "ex.imm_data", 24, 4},
		{"IbUverbsAttr", "data", 8, 8},
		{"Mlx5IbCreateQp", "sq_buf_addr", 40, 8},
	} {
		if off, size := cMember(t, c.goName, c.cPath); off != c.off || size != c.size {
			t.Errorf("%s %s at %d (%d bytes), ABI-NOTES says %d (%d bytes)", c.goName, c.cPath, off, size, c.off, c.size)
		}
	}
	for _, c := range []struct {
		goName, cPath string
		off, elemSize uintptr
	}{
		{"RxeSendWqe", "dma.sge", 208, 16},
		{"RxeSendWqe", "dma.inline_data", 208, 1},
		{"RxeRecvWqe", "dma.sge", 40, 16},
		{"IbUverbsIoctlHdr", "attrs", 24, 16},
		{"IbUverbsCreateCq", "driver_data", 32, 8},
		{"IbUverbsCreateQp", "driver_data", 56, 8},
		{"RxeQueueBuf", "data", 384, 1},
	} {
		if tl := cTail(t, c.goName, c.cPath); tl.Offset != c.off || tl.ElemSize != c.elemSize {
			t.Errorf("%s %s[] at %d (%d-byte elements), ABI-NOTES says %d (%d)", c.goName, c.cPath, tl.Offset, tl.ElemSize, c.off, c.elemSize)
		}
	}

	// Accessors write where the table says the member is.
	var wr RxeSendWr
	wr.SetWrUdAhNum(0x01020304)
	wr.SetWrAtomicSwap(0x1122334455667788)
	wrOff, _ := goOffset(t, reflect.TypeFor[RxeSendWr](), "Wr")
	if got := binary.NativeEndian.Uint32(wr.Wr[36-wrOff:]); got != 0x01020304 || wr.WrUdAhNum() != 0x01020304 {
		t.Errorf("wr.ud.ah_num: bytes say %#x, accessor %#x", got, wr.WrUdAhNum())
	}
	if got := binary.NativeEndian.Uint64(wr.Wr[40-wrOff:]); got != 0x1122334455667788 || wr.WrAtomicSwap() != got {
		t.Errorf("wr.atomic.swap: bytes say %#x, accessor %#x", got, wr.WrAtomicSwap())
	}
	var a IbUverbsAttr
	a.SetDataS64(-2)
	if a.Data() != 0xfffffffffffffffe {
		t.Errorf("data/data_s64 do not share storage: %#x", a.Data())
	}
}

// TestABINotesConstants checks constant values written down in ABI-NOTES.md.
func TestABINotesConstants(t *testing.T) {
	// _IOWR(type, nr, size) = 3<<30 | size<<16 | type<<8 | nr (asm-generic/ioctl.h).
	iowr := uint64(3)<<30 | uint64(reflect.TypeFor[IbUverbsIoctlHdr]().Size())<<16 | RDMA_IOCTL_MAGIC<<8 | 1
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"RDMA_VERBS_IOCTL", RDMA_VERBS_IOCTL, 0xC0181B01},
		{"_IOWR(RDMA_IOCTL_MAGIC, 1, struct ib_uverbs_ioctl_hdr)", iowr, RDMA_VERBS_IOCTL},
		{"RDMA_IOCTL_MAGIC", RDMA_IOCTL_MAGIC, 0x1b},
		{"IB_USER_VERBS_CMD_FLAG_EXTENDED", IB_USER_VERBS_CMD_FLAG_EXTENDED, 0x80000000},
		{"IB_USER_VERBS_CMD_GET_CONTEXT", IB_USER_VERBS_CMD_GET_CONTEXT, 0},
		{"IB_USER_VERBS_CMD_CREATE_CQ", IB_USER_VERBS_CMD_CREATE_CQ, 18},
		{"IB_USER_VERBS_CMD_REQ_NOTIFY_CQ", IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, 23},
		{"IB_USER_VERBS_CMD_CREATE_QP", IB_USER_VERBS_CMD_CREATE_QP, 24},
		{"IB_USER_VERBS_CMD_POST_SEND", IB_USER_VERBS_CMD_POST_SEND, 28},
		{"IB_USER_VERBS_CMD_OPEN_QP", IB_USER_VERBS_CMD_OPEN_QP, 40},
		{"IB_USER_VERBS_EX_CMD_CREATE_FLOW", IB_USER_VERBS_EX_CMD_CREATE_FLOW, 50},
		{"IB_USER_VERBS_EX_CMD_MODIFY_CQ", IB_USER_VERBS_EX_CMD_MODIFY_CQ, 57},
		{"UVERBS_ATTR_F_MANDATORY", UVERBS_ATTR_F_MANDATORY, 1},
		{"UVERBS_ATTR_F_VALID_OUTPUT", UVERBS_ATTR_F_VALID_OUTPUT, 2},
		{"UVERBS_ATTR_UHW_IN", UVERBS_ATTR_UHW_IN, 0x1000},
		{"UVERBS_ATTR_UHW_OUT", UVERBS_ATTR_UHW_OUT, 0x1001},
		{"UVERBS_UDATA_DRIVER_DATA_NS", UVERBS_UDATA_DRIVER_DATA_NS, 1},
		{"UVERBS_OBJECT_DEVICE", UVERBS_OBJECT_DEVICE, 0},
		{"UVERBS_OBJECT_CQ", UVERBS_OBJECT_CQ, 3},
		{"UVERBS_OBJECT_QP", UVERBS_OBJECT_QP, 4},
		{"UVERBS_OBJECT_ASYNC_EVENT", UVERBS_OBJECT_ASYNC_EVENT, 16},
		{"UVERBS_METHOD_CQ_CREATE", UVERBS_METHOD_CQ_CREATE, 0},
		{"UVERBS_METHOD_QUERY_GID_ENTRY", UVERBS_METHOD_QUERY_GID_ENTRY, 6},
		{"UVERBS_ATTR_CREATE_CQ_HANDLE", UVERBS_ATTR_CREATE_CQ_HANDLE, 0},
		{"UVERBS_ATTR_CREATE_CQ_RESP_CQE", UVERBS_ATTR_CREATE_CQ_RESP_CQE, 6},
		{"UVERBS_ATTR_CREATE_CQ_EVENT_FD", UVERBS_ATTR_CREATE_CQ_EVENT_FD, 7},
		{"UVERBS_ATTR_CREATE_QP_RESP_QP_NUM", UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, 14},
		{"IB_UVERBS_QP_CREATE_SQ_SIG_ALL", IB_UVERBS_QP_CREATE_SQ_SIG_ALL, 1 << 12},
		{"RDMA_DRIVER_MLX5", RDMA_DRIVER_MLX5, 1},
		{"RDMA_DRIVER_RXE", RDMA_DRIVER_RXE, 14},
		{"RDMA_DRIVER_SIW", RDMA_DRIVER_SIW, 18},
		{"RDMA_NL_NLDEV", RDMA_NL_NLDEV, 5},
		{"RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET)", RDMA_NL_NLDEV<<10 + RDMA_NLDEV_CMD_GET, 5121},
		{"RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET_CHARDEV)", RDMA_NL_NLDEV<<10 + RDMA_NLDEV_CMD_GET_CHARDEV, 5135},
		{"RDMA_NLDEV_CMD_PORT_GET", RDMA_NLDEV_CMD_PORT_GET, 5},
		{"RDMA_NLDEV_ATTR_DEV_INDEX", RDMA_NLDEV_ATTR_DEV_INDEX, 1},
		{"RDMA_NLDEV_ATTR_DEV_NAME", RDMA_NLDEV_ATTR_DEV_NAME, 2},
		{"RDMA_NLDEV_ATTR_DEV_NODE_TYPE", RDMA_NLDEV_ATTR_DEV_NODE_TYPE, 14},
		{"RDMA_NLDEV_ATTR_NDEV_INDEX", RDMA_NLDEV_ATTR_NDEV_INDEX, 50},
		{"RDMA_NLDEV_ATTR_DEV_PROTOCOL", RDMA_NLDEV_ATTR_DEV_PROTOCOL, 67},
		{"RDMA_NLDEV_ATTR_CHARDEV_TYPE", RDMA_NLDEV_ATTR_CHARDEV_TYPE, 69},
		{"RDMA_NLDEV_ATTR_CHARDEV", RDMA_NLDEV_ATTR_CHARDEV, 72},
		{"RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID", RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, 73},
		{"MLX5_IB_OBJECT_UAR", MLX5_IB_OBJECT_UAR, 0x1008},
		{"MLX5_IB_METHOD_UAR_OBJ_ALLOC", MLX5_IB_METHOD_UAR_OBJ_ALLOC, 0x1000},
		{"MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE", MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE, 0x1000},
		{"MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE", MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE, 0x1001},
		{"MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET", MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, 0x1002},
		{"MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH", MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, 0x1003},
		{"MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID", MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, 0x1004},
		{"MLX5_QP_FLAG_UAR_PAGE_INDEX", MLX5_QP_FLAG_UAR_PAGE_INDEX, 1 << 10},
		{"MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX", MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX, 2},
		{"MLX5_IB_ALLOC_UCTX_DEVX", MLX5_IB_ALLOC_UCTX_DEVX, 1},
		{"MLX5_LIB_CAP_DYN_UAR", MLX5_LIB_CAP_DYN_UAR, 2},
		{"MLX5_IB_MMAP_ALLOC_WC", MLX5_IB_MMAP_ALLOC_WC, 6},
		{"IB_UVERBS_GID_TYPE_ROCE_V2", IB_UVERBS_GID_TYPE_ROCE_V2, 2},
		{"IB_UVERBS_ACCESS_REMOTE_ATOMIC", IB_UVERBS_ACCESS_REMOTE_ATOMIC, 8},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, ABI-NOTES says %#x", c.name, c.got, c.want)
		}
	}
}

// TestHandWrittenFraming checks the sizes and values the hand-written ioctl
// and write framing (ioctl.go, write.go) spell as numbers against the
// generated ones.
func TestHandWrittenFraming(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"ioctlHdrSize", ioctlHdrSize, uint64(reflect.TypeFor[IbUverbsIoctlHdr]().Size())},
		{"ioctlAttrSize", ioctlAttrSize, uint64(reflect.TypeFor[IbUverbsAttr]().Size())},
		{"legacyCmdHdrSize", legacyCmdHdrSize, uint64(reflect.TypeFor[IbUverbsCmdHdr]().Size())},
		{"extendedCmdHdrSize", extendedCmdHdrSize, uint64(reflect.TypeFor[IbUverbsExCmdHdr]().Size())},
		{"rdmaVerbsIoctl", rdmaVerbsIoctl, RDMA_VERBS_IOCTL},
		{"attrFMandatory", attrFMandatory, UVERBS_ATTR_F_MANDATORY},
		{"attrFValidOutput", attrFValidOutput, UVERBS_ATTR_F_VALID_OUTPUT},
		{"attrUHWIn", attrUHWIn, UVERBS_ATTR_UHW_IN},
		{"attrUHWOut", attrUHWOut, UVERBS_ATTR_UHW_OUT},
		{"objectDevice", objectDevice, UVERBS_OBJECT_DEVICE},
		{"methodInvokeWrite", methodInvokeWrite, UVERBS_METHOD_INVOKE_WRITE},
		{"attrWriteCoreIn", attrWriteCoreIn, UVERBS_ATTR_CORE_IN},
		{"attrWriteCoreOut", attrWriteCoreOut, UVERBS_ATTR_CORE_OUT},
		{"attrWriteCmd", attrWriteCmd, UVERBS_ATTR_WRITE_CMD},
		{"cmdFlagExtended", cmdFlagExtended, IB_USER_VERBS_CMD_FLAG_EXTENDED},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, generated C value %#x", c.name, c.got, c.want)
		}
	}
}
