package mlx5

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/internal/usermem"
	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/provider/mlx5/internal/mlx5dv"
	"golang.org/x/sys/unix"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name (a hex dump), or writes it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	dump := hex.Dump(got)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(dump), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if dump != string(want) {
		t.Errorf("%s differs from the golden file:\ngot:\n%swant:\n%s", name, dump, want)
	}
}

// cfield reads member m of C struct s at base in b, big-endian (its first 8
// bytes if it is longer), using only the layout gcc reported for
// <infiniband/mlx5dv.h>: an independent decoder for what the codecs wrote.
func cfield(t *testing.T, b []byte, base int, s, m string) uint64 {
	t.Helper()
	off, size, ok := mlx5dv.Member(s, m)
	if !ok {
		t.Fatalf("no C member %s.%s", s, m)
	}
	var v uint64
	for i := 0; i < int(min(size, 8)); i++ {
		v = v<<8 | uint64(b[base+int(off)+i])
	}
	return v
}

// check is one expected field of a WQE: member m of C struct s at byte at
// of the WQE (laid out contiguously, wrap undone).
type check struct {
	at   int
	s, m string
	v    uint64
}

// userMem is test memory with a stable address, for inline SGEs.
func userMem(t *testing.T, data []byte) uint64 {
	t.Helper()
	r, err := mmap.Anonymous(len(data))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	copy(r.Bytes(), data)
	return uint64(r.Addr())
}

type testAH struct{ a *ah }

func (h testAH) ProviderAH() provider.AH { return h.a }

func TestGoldenSendWQEs(t *testing.T) {
	const qpn = 0x012345
	inl8 := userMem(t, []byte("ABCDEFGH"))
	inl100 := userMem(t, bytes.Repeat([]byte("0123456789"), 10))
	grhAH := &ah{av: buildAV(&provider.AHAttr{DLID: 0x21, SL: 3, SrcPathBits: 1, StaticRate: 2, IsGlobal: true,
		DGID: [16]byte{0xfe, 0x80, 15: 0x02}, FlowLabel: 0xabcde, SGIDIndex: 1, HopLimit: 64, TrafficClass: 5}, [6]byte{})}
	sge := func(addr uint64, n, lkey uint32) provider.SGE { return provider.SGE{Addr: addr, Length: n, LKey: lkey} }
	const ctrl, raddr, atomic, data, av, inl = "mlx5_wqe_ctrl_seg", "mlx5_wqe_raddr_seg", "mlx5_wqe_atomic_seg", "mlx5_wqe_data_seg", "mlx5_wqe_av", "mlx5_wqe_inl_data_seg"
	const umr, mkey, klm = "mlx5_wqe_umr_ctrl_seg", "mlx5_wqe_mkey_context_seg", "mlx5_wqe_umr_klm_seg"
	ctrlChecks := func(head uint32, op uint8, ds uint32, fm uint8, imm uint32) []check {
		return []check{
			{0, ctrl, "opmod_idx_opcode", uint64(head&0xffff)<<8 | uint64(op)},
			{0, ctrl, "qpn_ds", qpn<<8 | uint64(ds)},
			{0, ctrl, "signature", 0},
			{0, ctrl, "fm_ce_se", uint64(fm)},
			{0, ctrl, "imm", uint64(imm)},
		}
	}
	dataChecks := func(at int, n, lkey uint32, addr uint64) []check {
		return []check{{at, data, "byte_count", uint64(n)}, {at, data, "lkey", uint64(lkey)}, {at, data, "addr", addr}}
	}
	cat := func(cs ...[]check) (all []check) {
		for _, c := range cs {
			all = append(all, c...)
		}
		return all
	}
	for _, c := range []struct {
		name   string
		typ    provider.QPType
		ring   int // WQEBBs
		head   uint32
		wr     provider.SendWR
		sigAll bool
		bbs    uint32
		checks []check
	}{
		{"send", provider.QPTypeRC, 8, 3, provider.SendWR{ID: 1, Opcode: provider.WRSend, Flags: provider.SendSignaled,
			SGL: []provider.SGE{sge(0x1000, 64, 0x1234)}}, false, 1,
			cat(ctrlChecks(3, opSend, 2, ctrlCQUpdate, 0), dataChecks(16, 64, 0x1234, 0x1000))},
		{"send_imm", provider.QPTypeRC, 8, 0x10005, provider.SendWR{Opcode: provider.WRSendWithImm, Flags: provider.SendSolicited,
			Imm: 0xdeadbeef, SGL: []provider.SGE{sge(0x2000, 1, 7)}}, false, 1,
			cat(ctrlChecks(0x10005, opSendImm, 2, ctrlSolicited, 0xdeadbeef), dataChecks(16, 1, 7, 0x2000))},
		{"send_inv", provider.QPTypeRC, 8, 0, provider.SendWR{Opcode: provider.WRSendWithInv, Flags: provider.SendFence,
			InvalidateRKey: 0x4242, SGL: []provider.SGE{sge(0x3000, 16, 9)}}, true, 1,
			cat(ctrlChecks(0, opSendInval, 2, ctrlFence|ctrlCQUpdate, 0x4242), dataChecks(16, 16, 9, 0x3000))},
		{"rdma_write", provider.QPTypeRC, 8, 1, provider.SendWR{Opcode: provider.WRRDMAWrite, Flags: provider.SendSignaled,
			RemoteAddr: 0xaabbccdd00112233, RKey: 0x5555,
			SGL: []provider.SGE{sge(0x4000, 100, 1), sge(0x5000, 0, 2), sge(0x6000, 28, 3)}}, false, 1,
			cat(ctrlChecks(1, opRDMAWrite, 4, ctrlCQUpdate, 0),
				[]check{{16, raddr, "raddr", 0xaabbccdd00112233}, {16, raddr, "rkey", 0x5555}, {16, raddr, "reserved", 0}},
				dataChecks(32, 100, 1, 0x4000), dataChecks(48, 28, 3, 0x6000))},
		{"rdma_write_imm", provider.QPTypeUC, 8, 2, provider.SendWR{Opcode: provider.WRRDMAWriteWithImm, Imm: 0x01020304,
			RemoteAddr: 0x10000, RKey: 0x66, SGL: []provider.SGE{sge(0x7000, 4096, 4)}}, false, 1,
			cat(ctrlChecks(2, opRDMAWriteIm, 3, 0, 0x01020304),
				[]check{{16, raddr, "raddr", 0x10000}, {16, raddr, "rkey", 0x66}}, dataChecks(32, 4096, 4, 0x7000))},
		{"rdma_read", provider.QPTypeRC, 8, 7, provider.SendWR{Opcode: provider.WRRDMARead, Flags: provider.SendSignaled,
			RemoteAddr: 0x20000, RKey: 0x77, SGL: []provider.SGE{sge(0x8000, 512, 5)}}, false, 1,
			cat(ctrlChecks(7, opRDMARead, 3, ctrlCQUpdate, 0),
				[]check{{16, raddr, "raddr", 0x20000}, {16, raddr, "rkey", 0x77}}, dataChecks(32, 512, 5, 0x8000))},
		{"atomic_cmp_swp", provider.QPTypeRC, 8, 4, provider.SendWR{Opcode: provider.WRAtomicCmpAndSwp, Flags: provider.SendSignaled,
			RemoteAddr: 0x30008, RKey: 0x88, CompareAdd: 0x2222, Swap: 0x1111, SGL: []provider.SGE{sge(0x9000, 8, 6)}}, false, 1,
			cat(ctrlChecks(4, opAtomicCS, 4, ctrlCQUpdate, 0),
				[]check{{16, raddr, "raddr", 0x30008}, {16, raddr, "rkey", 0x88},
					{32, atomic, "swap_add", 0x1111}, {32, atomic, "compare", 0x2222}},
				dataChecks(48, 8, 6, 0x9000))},
		{"atomic_fetch_add", provider.QPTypeRC, 8, 5, provider.SendWR{Opcode: provider.WRAtomicFetchAndAdd, Flags: provider.SendSignaled,
			RemoteAddr: 0x30010, RKey: 0x99, CompareAdd: 7, SGL: []provider.SGE{sge(0xa000, 8, 6)}}, false, 1,
			cat(ctrlChecks(5, opAtomicFA, 4, ctrlCQUpdate, 0),
				[]check{{16, raddr, "raddr", 0x30010}, {32, atomic, "swap_add", 7}, {32, atomic, "compare", 0}},
				dataChecks(48, 8, 6, 0xa000))},
		{"send_inline", provider.QPTypeRC, 8, 6, provider.SendWR{Opcode: provider.WRSend, Flags: provider.SendInline | provider.SendSignaled,
			SGL: []provider.SGE{sge(inl8, 3, 0), sge(inl8+3, 5, 0)}}, false, 1,
			cat(ctrlChecks(6, opSend, 2, ctrlCQUpdate, 0), []check{{16, inl, "byte_count", 8 | inlineSeg}})},
		{"rdma_write_inline_wrap", provider.QPTypeRC, 4, 3, provider.SendWR{Opcode: provider.WRRDMAWrite, Flags: provider.SendInline,
			RemoteAddr: 0x40000, RKey: 0xaa, SGL: []provider.SGE{sge(inl100, 100, 0)}}, false, 3,
			cat(ctrlChecks(3, opRDMAWrite, 9, 0, 0), []check{{16, raddr, "raddr", 0x40000}, {32, inl, "byte_count", 100 | inlineSeg}})},
		{"send_sgl_wrap", provider.QPTypeRC, 4, 7, provider.SendWR{Opcode: provider.WRSend, Flags: provider.SendSignaled,
			SGL: []provider.SGE{sge(0x1000, 1, 1), sge(0x2000, 2, 2), sge(0x3000, 3, 3), sge(0x4000, 4, 4), sge(0x5000, 5, 5), sge(0x6000, 6, 6)}}, false, 2,
			cat(ctrlChecks(7, opSend, 7, ctrlCQUpdate, 0), dataChecks(16, 1, 1, 0x1000), dataChecks(64, 4, 4, 0x4000), dataChecks(96, 6, 6, 0x6000))},
		// BIND_MW of a type 2 window (rdma-core's set_bind_wr): imm is the
		// window's current key; UMR ctrl flags TRNSLATION_OFFSET|INLINE|
		// CHECK_FREE (0x10|0x80|0x20), klm_octowords 4, mkey_mask
		// FREE|MKEY|QPN|LEN|START_ADDR|the four access bits; mkey context:
		// qpn<<8 | new key byte, remote write|read (0x20|0x10), start and
		// length; then the KLM (length, the MR's lkey, address) in 64 bytes.
		{"bind_mw_type2", provider.QPTypeRC, 4, 3, provider.SendWR{Opcode: provider.WRBindMW, Flags: provider.SendSignaled,
			Bind: provider.MWBind{MWRKey: 0x1234ab, NewRKey: 0x1234ac, MRLKey: 0x5501, Addr: 0x7f0000002000, Length: 4096,
				Access: uint32(abi.IB_UVERBS_ACCESS_REMOTE_WRITE | abi.IB_UVERBS_ACCESS_REMOTE_READ)}}, false, 3,
			cat(ctrlChecks(3, opUMR, 12, ctrlCQUpdate, 0x1234ab),
				[]check{{16, umr, "flags", 0xb0}, {16, umr, "klm_octowords", 4},
					{16, umr, "mkey_mask", 1<<29 | 1<<13 | 1<<14 | 1<<0 | 1<<6 | 1<<18 | 1<<19 | 1<<20 | 1<<21},
					{64, mkey, "free", 0}, {64, mkey, "access_flags", 0x30}, {64, mkey, "qpn_mkey", qpn<<8 | 0xac},
					{64, mkey, "start_addr", 0x7f0000002000}, {64, mkey, "len", 4096},
					{128, klm, "byte_count", 4096}, {128, klm, "mkey", 0x5501}, {128, klm, "address", 0x7f0000002000}})},
		// A zero-based bind writes start_addr 0; the KLM keeps the address.
		{"bind_mw_zero_based", provider.QPTypeUC, 8, 0, provider.SendWR{Opcode: provider.WRBindMW,
			Bind: provider.MWBind{MWRKey: 0x99, NewRKey: 0x9a, MRLKey: 7, Addr: 0x3000, Length: 64,
				Access: uint32(abi.IB_UVERBS_ACCESS_REMOTE_READ | abi.IB_UVERBS_ACCESS_REMOTE_ATOMIC | abi.IB_UVERBS_ACCESS_LOCAL_WRITE | abi.IB_UVERBS_ACCESS_ZERO_BASED)}}, false, 3,
			cat(ctrlChecks(0, opUMR, 12, 0, 0x99),
				[]check{{64, mkey, "access_flags", 0x10 | 0x40 | 0x08}, {64, mkey, "start_addr", 0}, {64, mkey, "len", 64},
					{128, klm, "address", 0x3000}})},
		// LOCAL_INV: a type 2 unbind to key byte 0: flags TRNSLATION_OFFSET|
		// INLINE|CHECK_QPN (0x98), no KLM, mask FREE|MKEY|QPN, the mkey
		// context free with QPN 0xffffff.
		{"local_inv", provider.QPTypeRC, 8, 1, provider.SendWR{Opcode: provider.WRLocalInv, Flags: provider.SendSignaled,
			InvalidateRKey: 0x4242}, false, 2,
			cat(ctrlChecks(1, opUMR, 8, ctrlCQUpdate, 0x4242),
				[]check{{16, umr, "flags", 0x98}, {16, umr, "klm_octowords", 0}, {16, umr, "mkey_mask", 1<<29 | 1<<13 | 1<<14},
					{64, mkey, "free", 0x40}, {64, mkey, "qpn_mkey", 0xffffff00}, {64, mkey, "len", 0}})},
		{"ud_send", provider.QPTypeUD, 8, 2, provider.SendWR{Opcode: provider.WRSendWithImm, Flags: provider.SendSignaled, Imm: 9,
			SGL: []provider.SGE{sge(0xb000, 256, 0x31)}, UD: provider.UDDest{AH: testAH{grhAH}, RemoteQPN: 0x77, QKey: 0x11111111}}, false, 2,
			cat(ctrlChecks(2, opSendImm, 5, ctrlCQUpdate, 9),
				[]check{{16, av, "key.qkey.qkey", 0x11111111}, {16, av, "dqp_dct", 0x77 | extendedUDAV},
					{16, av, "stat_rate_sl", 2<<4 | 3}, {16, av, "fl_mlid", 1}, {16, av, "rlid", 0x21},
					{16, av, "tclass", 5}, {16, av, "hop_limit", 64}, {16, av, "grh_gid_fl", 1<<30 | 1<<20 | 0xabcde},
					{16, av, "rgid", 0xfe80000000000000}},
				dataChecks(64, 256, 0x31, 0xb000))},
	} {
		t.Run(c.name, func(t *testing.T) {
			ring := make([]byte, c.ring*wqeBB)
			shape := testShape(c.typ, 8, 128, 4)
			p, err := checkSend(&shape, &c.wr)
			if err != nil {
				t.Fatal(err)
			}
			if p.bbs != c.bbs {
				t.Fatalf("WQE of %d WQEBBs, want %d", p.bbs, c.bbs)
			}
			buildSend(ring, c.head, qpn, &c.wr, &p, c.sigAll || c.wr.Flags&provider.SendSignaled != 0)
			// Undo the wrap; everything outside the WQE must be untouched.
			var wqe []byte
			mask := uint32(c.ring - 1)
			for i := uint32(0); i < p.bbs; i++ {
				o := int((c.head+i)&mask) * wqeBB
				wqe = append(wqe, ring[o:o+wqeBB]...)
				clear(ring[o : o+wqeBB])
			}
			if !bytes.Equal(ring, make([]byte, len(ring))) {
				t.Errorf("bytes outside the WQE's WQEBBs were written")
			}
			golden(t, "wqe/"+c.name+".hex", wqe)
			for _, k := range c.checks {
				if got := cfield(t, wqe, k.at, k.s, k.m); got != k.v {
					t.Errorf("%s.%s at %d = %#x, want %#x", k.s, k.m, k.at, got, k.v)
				}
			}
			if int(p.ds)*segSize > len(wqe) || (int(p.ds)*segSize+wqeBB-1)/wqeBB != int(p.bbs) {
				t.Errorf("ds %d does not fill %d WQEBBs", p.ds, p.bbs)
			}
			if p.inline {
				var src []byte
				for _, s := range c.wr.SGL {
					src = append(src, usermem.Bytes(s.Addr, int(s.Length))...)
				}
				at := int(p.ds)*segSize - ((inlHdrSize + len(src) + segSize - 1) &^ (segSize - 1))
				if !bytes.Equal(wqe[at+inlHdrSize:at+inlHdrSize+len(src)], src) {
					t.Errorf("inline bytes at %d: % x, want % x", at+inlHdrSize, wqe[at+inlHdrSize:at+inlHdrSize+len(src)], src)
				}
			}
		})
	}
}

func TestGoldenRecvWQEs(t *testing.T) {
	sgl := []provider.SGE{{Addr: 0x1000, Length: 64, LKey: 1}, {Addr: 0x2000, Length: 0, LKey: 2}, {Addr: 0x3000, Length: 32, LKey: 3}}
	// A receive WQE of 4 data segments with 2 used: the third ends the list.
	w := make([]byte, 4*dataSize)
	buildRecv(w, sgl)
	golden(t, "wqe/recv.hex", w)
	const data = "mlx5_wqe_data_seg"
	for _, k := range []check{
		{0, data, "byte_count", 64}, {0, data, "lkey", 1}, {0, data, "addr", 0x1000},
		{16, data, "byte_count", 32}, {16, data, "lkey", 3}, {16, data, "addr", 0x3000},
		{32, data, "byte_count", 0}, {32, data, "lkey", invalidLKey}, {32, data, "addr", 0},
	} {
		if got := cfield(t, w, k.at, k.s, k.m); got != k.v {
			t.Errorf("%s.%s at %d = %#x, want %#x", k.s, k.m, k.at, got, k.v)
		}
	}
	// Full: no terminator.
	w2 := make([]byte, 2*dataSize)
	buildRecv(w2, sgl)
	if cfield(t, w2, 16, data, "lkey") != 3 {
		t.Errorf("a full WQE got a terminator")
	}

	// An SRQ WQE: next segment, then the scatter list.
	cnt, shift := srqSize(3, 2)
	if cnt != 4 || shift != 6 {
		t.Fatalf("srqSize(3, 2) = %d WQEs of %d bytes, want 4 of 64", cnt, 1<<shift)
	}
	if cnt, shift := srqSize(1, 0); cnt != 2 || 1<<shift != 32 {
		t.Errorf("srqSize(1, 0) = %d WQEs of %d bytes, want 2 of 32 (the kernel's minimum)", cnt, 1<<shift)
	}
}

func TestSendValidation(t *testing.T) {
	rc := testShape(provider.QPTypeRC, 2, 16, 1)
	ud := testShape(provider.QPTypeUD, 1, 0, 2)
	uc := testShape(provider.QPTypeUC, 2, 0, 1)
	one := []provider.SGE{{Addr: 1, Length: 8, LKey: 1}}
	for _, c := range []struct {
		name  string
		shape sqShape
		wr    provider.SendWR
		err   error
	}{
		{"too many SGEs", rc, provider.SendWR{Opcode: provider.WRSend, SGL: make([]provider.SGE, 3)}, unix.EINVAL},
		{"inline too long", rc, provider.SendWR{Opcode: provider.WRSend, Flags: provider.SendInline, SGL: []provider.SGE{{Length: 17}}}, unix.EINVAL},
		{"unknown opcode", rc, provider.SendWR{Opcode: 42}, unix.EINVAL},
		{"unknown flag", rc, provider.SendWR{Opcode: provider.WRSend, Flags: 1 << 9}, unix.EINVAL},
		{"local inv on a 64-byte queue", rc, provider.SendWR{Opcode: provider.WRLocalInv}, unix.EINVAL},
		{"bind of 2 GiB + 1", testShape(provider.QPTypeRC, 2, 16, 3), provider.SendWR{Opcode: provider.WRBindMW,
			Bind: provider.MWBind{Length: 1<<31 + 1}}, provider.ErrNotSupported},
		{"bind with an SGL", testShape(provider.QPTypeRC, 2, 16, 3), provider.SendWR{Opcode: provider.WRBindMW, SGL: one}, unix.EINVAL},
		{"bind with another index", testShape(provider.QPTypeRC, 2, 16, 3), provider.SendWR{Opcode: provider.WRBindMW,
			Bind: provider.MWBind{MWRKey: 0x100, NewRKey: 0x201}}, unix.EINVAL},
		{"local inv on UC", testShape(provider.QPTypeUC, 2, 16, 3), provider.SendWR{Opcode: provider.WRLocalInv}, unix.EINVAL},
		{"read on UC", uc, provider.SendWR{Opcode: provider.WRRDMARead, SGL: one}, unix.EINVAL},
		{"atomic on UC", uc, provider.SendWR{Opcode: provider.WRAtomicFetchAndAdd, SGL: one}, unix.EINVAL},
		{"write on UD", ud, provider.SendWR{Opcode: provider.WRRDMAWrite, SGL: one}, unix.EINVAL},
		{"UD without AH", ud, provider.SendWR{Opcode: provider.WRSend, SGL: one}, unix.EINVAL},
		{"atomic with 4 bytes", rc, provider.SendWR{Opcode: provider.WRAtomicCmpAndSwp, SGL: []provider.SGE{{Length: 4}}}, unix.EINVAL},
		{"atomic misaligned", rc, provider.SendWR{Opcode: provider.WRAtomicCmpAndSwp, RemoteAddr: 4, SGL: one}, unix.EINVAL},
		{"inline read", rc, provider.SendWR{Opcode: provider.WRRDMARead, Flags: provider.SendInline, SGL: one}, unix.EINVAL},
		{"2 GiB + 1", rc, provider.SendWR{Opcode: provider.WRRDMARead, SGL: []provider.SGE{{Length: 1 << 31}, {Length: 1}}}, unix.EINVAL},
		{"send with inv on UC", uc, provider.SendWR{Opcode: provider.WRSendWithInv, SGL: one}, unix.EINVAL},
	} {
		_, err := checkSend(&c.shape, &c.wr)
		if !errors.Is(err, c.err) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.err)
		}
	}
	if _, err := checkSend(&rc, &provider.SendWR{Opcode: provider.WRSend, Flags: provider.SendInline, SGL: []provider.SGE{{Length: 16}}}); err != nil {
		t.Errorf("16 bytes inline on a 16-byte QP: %v", err)
	}
	if _, err := checkSend(&rc, &provider.SendWR{Opcode: provider.WRSend}); err != nil {
		t.Errorf("zero-length send: %v", err)
	}
}

// testShape is the shape of a send queue of type typ, created for maxSGE
// SGEs and maxInline bytes inline, whose WQEs take at most maxBBs WQEBBs.
func testShape(typ provider.QPType, maxSGE, maxInline, maxBBs uint32) sqShape {
	s := sqShape{caps: provider.SendQueueCaps{Type: typ, MaxSGE: maxSGE, MaxInline: maxInline}, typ: typ, maxBBs: maxBBs}
	s.setPlain()
	return s
}
