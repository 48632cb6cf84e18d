package rxe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/provider"
	"golang.org/x/sys/unix"
)

var ne = binary.NativeEndian

// TestLayout pins the offsets the provider relies on to the numbers read
// from rdma_user_rxe.h and checked on 6.1 (ABI-NOTES §3, §8); abi's own
// layout test checks the generated structs against the C compiler.
func TestLayout(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"rxe_queue_buf.log2_elem_size", offLog2, 0},
		{"rxe_queue_buf.index_mask", offIndexMask, 4},
		{"rxe_queue_buf.producer_index", offProducer, 128},
		{"rxe_queue_buf.consumer_index", offConsumer, 256},
		{"rxe_queue_buf.data", queueHdrSize, 384},
		{"sizeof(rxe_send_wqe)", sendWQESize, 208},
		{"sizeof(rxe_recv_wqe)", recvWQESize, 40},
		{"sizeof(rxe_sge)", sgeSize, 16},
		{"sizeof(ib_uverbs_wc)", wcSize, 48},
		{"rxe_send_wr.wr.ud.av (in wr)", udAVOffset, 32},
		{"sizeof(rxe_av)", avSize, 88},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}

// slotBytes copies slot i of q.
func slotBytes(q *queue, i uint32) []byte {
	off := queueHdrSize + int(i&q.mask)<<q.log2
	return append([]byte(nil), q.mem[off:off+q.slotSize()]...)
}

func TestPostSendWQEBytes(t *testing.T) {
	fk, c := testContext(t)
	qp := testQP(t, fk, c, qpSpec{handle: 0x42, cap: provider.QPCap{MaxSendSGE: 2, MaxRecvSGE: 1, MaxInlineData: 32}})
	buf, err := mmap.Anonymous(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	copy(buf.Bytes(), "0123456789abcdefghijklmnopqrstuvwxyz")
	base := uint64(buf.Addr())

	wrs := []provider.SendWR{
		{ID: 0x1111, Opcode: provider.WRSend, Flags: provider.SendSignaled | provider.SendSolicited,
			SGL: []provider.SGE{{Addr: 0xA000, Length: 100, LKey: 0x11}, {Addr: 0xB000, Length: 28, LKey: 0x12}}},
		{ID: 0x2222, Opcode: provider.WRRDMAWriteWithImm, Imm: 0x01020304, RemoteAddr: 0x7f0000001000, RKey: 0x99,
			SGL: []provider.SGE{{Addr: 0xC000, Length: 64, LKey: 0x13}}},
		{ID: 0x3333, Opcode: provider.WRAtomicCmpAndSwp, Flags: provider.SendFence, RemoteAddr: 0x2000, RKey: 0x77,
			CompareAdd: 0xAAAA, Swap: 0xBBBB, SGL: []provider.SGE{{Addr: 0xD000, Length: 8, LKey: 0x14}}},
		{ID: 0x4444, Opcode: provider.WRSend, Flags: provider.SendInline | provider.SendSignaled,
			SGL: []provider.SGE{{Addr: base, Length: 10}, {Addr: base + 26, Length: 5}}},
	}
	n, err := qp.PostSend(wrs)
	if err != nil || n != 4 {
		t.Fatalf("PostSend = %d, %v", n, err)
	}
	q := qp.sq.q
	if p := q.prod.Load(); p != 4 {
		t.Errorf("producer index = %d, want 4", p)
	}
	if d := fk.doorbells.Load(); d != 1 {
		t.Errorf("%d doorbells for one list, want 1", d)
	}
	// Doorbell: hdr{POST_SEND, in_words 8, out_words 1}, response, qp_handle, wr_count 0, sge_count 0, wqe_size 56.
	db := fk.lastDB[:]
	if ne.Uint32(db[0:]) != 28 || ne.Uint16(db[4:]) != 8 || ne.Uint16(db[6:]) != 1 || ne.Uint64(db[8:]) == 0 ||
		ne.Uint32(db[16:]) != 0x42 || ne.Uint32(db[20:]) != 0 || ne.Uint32(db[24:]) != 0 || ne.Uint32(db[28:]) != 56 {
		t.Errorf("doorbell bytes % x", db)
	}

	u32 := func(b []byte, off int) uint32 { return ne.Uint32(b[off:]) }
	u64 := func(b []byte, off int) uint64 { return ne.Uint64(b[off:]) }

	w := slotBytes(q, 0) // SEND, two SGEs
	if u64(w, 0) != 0x1111 || u32(w, 12) != 2 || u32(w, 16) != 6 || u64(w, 152) != 0 ||
		u32(w, 184) != 128 || u32(w, 188) != 128 || u32(w, 196) != 2 || u32(w, 148) != 0 {
		t.Errorf("SEND WQE: wr_id %#x opcode %d flags %#x iova %#x length %d resid %d num_sge %d state %d",
			u64(w, 0), u32(w, 12), u32(w, 16), u64(w, 152), u32(w, 184), u32(w, 188), u32(w, 196), u32(w, 148))
	}
	if u64(w, 208) != 0xA000 || u32(w, 216) != 100 || u32(w, 220) != 0x11 || u64(w, 224) != 0xB000 || u32(w, 232) != 28 || u32(w, 236) != 0x12 {
		t.Errorf("SEND SGEs % x", w[208:240])
	}

	w = slotBytes(q, 1) // WRITE_WITH_IMM
	if u32(w, 12) != 1 || !bytes.Equal(w[20:24], []byte{1, 2, 3, 4}) || u64(w, 24) != 0x7f0000001000 || u32(w, 32) != 0x99 ||
		u64(w, 152) != 0x7f0000001000 || u32(w, 184) != 64 || u32(w, 188) != 64 || u32(w, 196) != 1 {
		t.Errorf("WRITE_WITH_IMM WQE: opcode %d imm % x raddr %#x rkey %#x iova %#x len %d resid %d num_sge %d",
			u32(w, 12), w[20:24], u64(w, 24), u32(w, 32), u64(w, 152), u32(w, 184), u32(w, 188), u32(w, 196))
	}
	if ne.Uint32(w[176:]) != 1 {
		t.Errorf("second WQE's ssn = %d, want 1", ne.Uint32(w[176:]))
	}

	w = slotBytes(q, 2) // CMP_AND_SWP
	if u32(w, 12) != 5 || u32(w, 16) != 1 || u64(w, 24) != 0x2000 || u64(w, 32) != 0xAAAA || u64(w, 40) != 0xBBBB ||
		u32(w, 48) != 0x77 || u64(w, 152) != 0x2000 || u32(w, 184) != 8 {
		t.Errorf("CMP_AND_SWP WQE: % x", w[:200])
	}

	w = slotBytes(q, 3) // inline: 15 bytes from two SGEs, num_sge 0
	if u32(w, 16) != 10 || u32(w, 184) != 15 || u32(w, 188) != 15 || u32(w, 196) != 0 || string(w[208:223]) != "0123456789qrstu" {
		t.Errorf("inline WQE: flags %#x len %d resid %d num_sge %d data %q", u32(w, 16), u32(w, 184), u32(w, 188), u32(w, 196), w[208:223])
	}
}

// TestPostSendMWWQEs checks BIND_MW, LOCAL_INV and SEND_WITH_INV WQEs as
// rxe_bind_mw and rxe_do_local_ops read them (struct rxe_send_wr: ex at 20,
// wr.mw {addr, length, mr_lkey, mw_rkey, rkey, access} from 24).
func TestPostSendMWWQEs(t *testing.T) {
	for _, typ := range []provider.QPType{provider.QPTypeRC, provider.QPTypeUC} {
		fk, c := testContext(t)
		qp := testQP(t, fk, c, qpSpec{typ: typ, handle: 0x43, cap: provider.QPCap{MaxSendSGE: 1, MaxRecvSGE: 1}})
		wrs := []provider.SendWR{
			{ID: 0x5151, Opcode: provider.WRBindMW, Flags: provider.SendSignaled, Bind: provider.MWBind{
				MWRKey: 0x12345600, NewRKey: 0x123456ff, MRLKey: 0xabcd01, Addr: 0x7f0000002000, Length: 0x1000, Access: 0x2 | 0x4}},
		}
		if typ == provider.QPTypeRC { // UC has neither (provider.CheckSend)
			wrs = append(wrs, provider.SendWR{ID: 0x5252, Opcode: provider.WRSendWithInv, InvalidateRKey: 0x123456ff, SGL: []provider.SGE{{Addr: 0xA000, Length: 8, LKey: 1}}},
				provider.SendWR{ID: 0x5353, Opcode: provider.WRLocalInv, Flags: provider.SendSignaled, InvalidateRKey: 0x99887766})
		}
		if n, err := qp.PostSend(wrs); err != nil || n != len(wrs) {
			t.Fatalf("%v: PostSend = %d, %v", typ, n, err)
		}
		q := qp.sq.q
		u32 := func(b []byte, off int) uint32 { return ne.Uint32(b[off:]) }
		u64 := func(b []byte, off int) uint64 { return ne.Uint64(b[off:]) }
		w := slotBytes(q, 0)
		if u64(w, 0) != 0x5151 || u32(w, 12) != 8 || u32(w, 16) != 2 || u64(w, 24) != 0x7f0000002000 || u64(w, 32) != 0x1000 ||
			u32(w, 40) != 0xabcd01 || u32(w, 44) != 0x12345600 || u32(w, 48) != 0x123456ff || u32(w, 52) != 6 ||
			u64(w, 152) != 0x7f0000002000 || u32(w, 184) != 0 || u32(w, 196) != 0 {
			t.Errorf("%v BIND_MW WQE: % x", typ, w[:200])
		}
		if typ == provider.QPTypeRC {
			w = slotBytes(q, 1)
			if u32(w, 12) != 9 || u32(w, 20) != 0x123456ff || u32(w, 184) != 8 || u32(w, 196) != 1 {
				t.Errorf("%v SEND_WITH_INV WQE: % x", typ, w[:200])
			}
			w = slotBytes(q, 2)
			if u32(w, 12) != 7 || u32(w, 16) != 2 || u32(w, 20) != 0x99887766 || u32(w, 184) != 0 || u32(w, 196) != 0 {
				t.Errorf("LOCAL_INV WQE: % x", w[:200])
			}
		}
	}
}

func TestPostSendUDWQE(t *testing.T) {
	fk, c := testContext(t)
	qp := testQP(t, fk, c, qpSpec{typ: provider.QPTypeUD})
	st, err := c.CreateAH(provider.AHAttr{PortNum: 1, IsGlobal: true, SGIDIndex: 1, HopLimit: 64,
		DGID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 0, 14: 2, 15: 15}})
	if err != nil {
		t.Fatal(err)
	}
	_, out := st.Udata()
	if len(out) != 8 {
		t.Fatalf("AH udata out %d bytes, want 8", len(out))
	}
	ne.PutUint32(out, 5)
	pah, err := st.Complete(provider.AHCreated{Handle: 1})
	if err != nil {
		t.Fatal(err)
	}
	wr := provider.SendWR{ID: 9, Opcode: provider.WRSendWithImm, Imm: 0xdeadbeef, Flags: provider.SendSignaled,
		SGL: []provider.SGE{{Addr: 0x1000, Length: 20, LKey: 1}},
		UD:  provider.UDDest{AH: ahHolder{pah}, RemoteQPN: 0x11, QKey: 0x1234}}
	if _, err := qp.PostSend([]provider.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	w := slotBytes(qp.sq.q, 0)
	if ne.Uint32(w[24:]) != 0x11 || ne.Uint32(w[28:]) != 0x1234 || ne.Uint32(w[36:]) != 5 ||
		!bytes.Equal(w[20:24], []byte{0xde, 0xad, 0xbe, 0xef}) {
		t.Errorf("UD WQE: qpn %#x qkey %#x ah_num %d imm % x", ne.Uint32(w[24:]), ne.Uint32(w[28:]), ne.Uint32(w[36:]), w[20:24])
	}
	// The AH keeps the vector (port 1, IPv4, the GID, its index and hop
	// limit) but, having an AH number, the WQE does not carry it: the
	// kernel reads its own (as libibverbs' rxe copies it only without
	// one). The slot was fresh, so the vector's bytes at 56 stay zero.
	av := &pah.(*AH).av
	if av.PortNum != 1 || av.NetworkType != abi.RXE_NETWORK_TYPE_IPV4 || av.Grh.Dgid[15] != 15 || av.Grh.SgidIndex != 1 || av.Grh.HopLimit != 64 {
		t.Errorf("AH's vector % x", abi.Bytes(av))
	}
	if !bytes.Equal(w[udAVOffset+24:udAVOffset+24+avSize], make([]byte, avSize)) {
		t.Errorf("UD WQE with an AH number carries a vector: % x", w[56:144])
	}
}

// TestUserAV: a kernel that answers CREATE_AH without an AH number (Linux
// before 5.16) reads the whole address vector from each UD WQE, so the
// provider builds it as the kernel would have: source address from the GID
// table, destination MAC of a local destination from its interface.
func TestUserAV(t *testing.T) {
	fk, c := testContext(t)
	qp := testQP(t, fk, c, qpSpec{typ: provider.QPTypeUD})
	v4 := func(a, b, c, d byte) [16]byte { return [16]byte{10: 0xff, 11: 0xff, 12: a, 13: b, 14: c, 15: d} }
	fk.gids = map[[2]int][16]byte{{1, 1}: v4(10, 99, 0, 1)}
	own := [6]byte{0x52, 0x54, 0, 0x12, 0x34, 0x56}
	var asked []string
	old := localMAC
	t.Cleanup(func() { localMAC = old })
	localMAC = func(ip net.IP) ([6]byte, error) {
		asked = append(asked, ip.String())
		if ip.Equal(net.IPv4(10, 99, 0, 2)) {
			return own, nil
		}
		return [6]byte{}, nil
	}
	for _, tc := range []struct {
		name string
		dgid [16]byte
		mac  [6]byte
	}{{"local", v4(10, 99, 0, 2), own}, {"remote", v4(192, 0, 2, 7), [6]byte{}}} {
		st, err := c.CreateAH(provider.AHAttr{PortNum: 1, IsGlobal: true, SGIDIndex: 1, HopLimit: 64, TrafficClass: 3, DGID: tc.dgid})
		if err != nil {
			t.Fatal(err)
		}
		pah, err := st.Complete(provider.AHCreated{Handle: 1}) // the response left zero: no ah_num
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var want abi.RxeAv
		want.PortNum, want.NetworkType, want.Dmac = 1, abi.RXE_NETWORK_TYPE_IPV4, tc.mac
		want.Grh = abi.RxeGlobalRoute{Dgid: tc.dgid, SgidIndex: 1, HopLimit: 64, TrafficClass: 3}
		ne.PutUint16(want.SgidAddr[0:], unix.AF_INET)
		copy(want.SgidAddr[4:], []byte{10, 99, 0, 1})
		ne.PutUint16(want.DgidAddr[0:], unix.AF_INET)
		copy(want.DgidAddr[4:], tc.dgid[12:])
		if pah.(*AH).Num() != 0 || pah.(*AH).av != want {
			t.Errorf("%s: AH num %d av\n% x, want\n% x", tc.name, pah.(*AH).Num(), abi.Bytes(&pah.(*AH).av), abi.Bytes(&want))
		}
		wr := provider.SendWR{ID: 1, Opcode: provider.WRSend, SGL: []provider.SGE{{Addr: 0x1000, Length: 8, LKey: 1}},
			UD: provider.UDDest{AH: ahHolder{pah}, RemoteQPN: 0x11, QKey: 0x1234}}
		if _, err := qp.PostSend([]provider.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
	}
	// The WQEs carry the vectors at 56 (struct rxe_send_wqe.av on 5.10,
	// wr.ud.av since: the same bytes; sgid_addr at 32 in it) and ah_num 0.
	for i := uint32(0); i < 2; i++ {
		w := slotBytes(qp.sq.q, i)
		if ne.Uint32(w[36:]) != 0 || w[57] != abi.RXE_NETWORK_TYPE_IPV4 || !bytes.Equal(w[56+32+4:56+32+8], []byte{10, 99, 0, 1}) {
			t.Errorf("WQE %d: ah_num %d av % x", i, ne.Uint32(w[36:]), w[56:144])
		}
	}
	if want := []string{"10.99.0.2", "192.0.2.7"}; !slices.Equal(asked, want) {
		t.Errorf("MACs looked up for %v, want %v", asked, want)
	}

	// Refusals: no GRH (RoCE needs one), a GID the kernel cannot read, a
	// Kernel that cannot query GIDs; each names the cause.
	st, _ := c.CreateAH(provider.AHAttr{PortNum: 1})
	if _, err := st.Complete(provider.AHCreated{}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("AH without GRH and ah_num: %v, want EINVAL", err)
	}
	st, _ = c.CreateAH(provider.AHAttr{PortNum: 1, IsGlobal: true, SGIDIndex: 5, DGID: v4(10, 99, 0, 2)})
	if _, err := st.Complete(provider.AHCreated{}); !errors.Is(err, unix.ENODATA) || !strings.Contains(err.Error(), "source GID 5") {
		t.Errorf("AH with an unused source GID: %v, want ENODATA naming it", err)
	}
	c2 := &Context{k: noGIDOps{fakeOps{fk, c.f}}, f: c.f}
	st, _ = c2.CreateAH(provider.AHAttr{PortNum: 1, IsGlobal: true, SGIDIndex: 1, DGID: v4(10, 99, 0, 2)})
	if _, err := st.Complete(provider.AHCreated{}); !errors.Is(err, provider.ErrNotSupported) {
		t.Errorf("AH on a Kernel without QueryGID: %v, want ErrNotSupported", err)
	}
}

// noGIDOps hides fakeOps' QueryGID.
type noGIDOps struct{ provider.Kernel }

type ahHolder struct{ ah provider.AH }

func (h ahHolder) ProviderAH() provider.AH { return h.ah }

// TestPostSendRefusesBadLists posts a list with one bad request and checks
// that nothing moved: the error names the index, no slot byte changed, the
// producer index is unchanged and no doorbell was written. Then a good list
// goes through.
func TestPostSendRefusesBadLists(t *testing.T) {
	good := provider.SendWR{ID: 1, Opcode: provider.WRSend, SGL: []provider.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}
	write := provider.SendWR{ID: 2, Opcode: provider.WRRDMAWrite, RemoteAddr: 0x2000, RKey: 3, SGL: []provider.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}
	read := provider.SendWR{ID: 3, Opcode: provider.WRRDMARead, RemoteAddr: 0x2000, RKey: 3, SGL: []provider.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}
	atomicWR := provider.SendWR{ID: 4, Opcode: provider.WRAtomicFetchAndAdd, RemoteAddr: 0x2000, RKey: 3, SGL: []provider.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}
	bind := provider.SendWR{ID: 5, Opcode: provider.WRBindMW, Bind: provider.MWBind{MWRKey: 0x1200, NewRKey: 0x1201, MRLKey: 7, Addr: 0x1000, Length: 64, Access: 6}}
	mod := func(w provider.SendWR, f func(*provider.SendWR)) provider.SendWR { f(&w); return w }
	for _, c := range []struct {
		name  string
		typ   provider.QPType
		list  []provider.SendWR
		index int
		errno error
	}{
		{"too many SGEs", provider.QPTypeRC, []provider.SendWR{good, mod(good, func(w *provider.SendWR) {
			w.SGL = []provider.SGE{{Length: 1}, {Length: 1}, {Length: 1}}
		})}, 1, unix.EINVAL},
		{"inline too long", provider.QPTypeRC, []provider.SendWR{good, good, mod(good, func(w *provider.SendWR) {
			w.Flags = provider.SendInline
			w.SGL = []provider.SGE{{Addr: 0x1000, Length: 17}}
		})}, 2, unix.EINVAL},
		{"inline READ", provider.QPTypeRC, []provider.SendWR{mod(read, func(w *provider.SendWR) { w.Flags = provider.SendInline })}, 0, unix.EINVAL},
		{"atomic 4 bytes", provider.QPTypeRC, []provider.SendWR{good, mod(atomicWR, func(w *provider.SendWR) { w.SGL[0].Length = 4 })}, 1, unix.EINVAL},
		{"atomic unaligned", provider.QPTypeRC, []provider.SendWR{mod(atomicWR, func(w *provider.SendWR) { w.RemoteAddr = 0x2004 })}, 0, unix.EINVAL},
		{"atomic no SGE", provider.QPTypeRC, []provider.SendWR{mod(atomicWR, func(w *provider.SendWR) { w.SGL = nil })}, 0, unix.EINVAL},
		{"unknown opcode", provider.QPTypeRC, []provider.SendWR{good, mod(good, func(w *provider.SendWR) { w.Opcode = 42 })}, 1, unix.EINVAL},
		{"bind MW with an SGL", provider.QPTypeRC, []provider.SendWR{mod(good, func(w *provider.SendWR) { w.Opcode = provider.WRBindMW })}, 0, unix.EINVAL},
		{"bind MW on UD", provider.QPTypeUD, []provider.SendWR{bind}, 0, unix.EINVAL},
		{"bind MW, new key of another index", provider.QPTypeRC, []provider.SendWR{good, mod(bind, func(w *provider.SendWR) { w.Bind.NewRKey = 0x1301 })}, 1, unix.EINVAL},
		{"bind MW, bad access bits", provider.QPTypeRC, []provider.SendWR{mod(bind, func(w *provider.SendWR) { w.Bind.Access = 1 << 4 })}, 0, unix.EINVAL},
		{"bind MW, range wraps", provider.QPTypeRC, []provider.SendWR{mod(bind, func(w *provider.SendWR) { w.Bind.Addr = ^uint64(0) - 4 })}, 0, unix.EINVAL},
		{"bind MW inline", provider.QPTypeUC, []provider.SendWR{mod(bind, func(w *provider.SendWR) { w.Flags = provider.SendInline })}, 0, unix.EINVAL},
		{"LOCAL_INV on UC", provider.QPTypeUC, []provider.SendWR{{Opcode: provider.WRLocalInv, InvalidateRKey: 0x1234}}, 0, unix.EINVAL},
		{"LOCAL_INV with an SGL", provider.QPTypeRC, []provider.SendWR{{Opcode: provider.WRLocalInv, SGL: good.SGL}}, 0, unix.EINVAL},
		{"READ on UC", provider.QPTypeUC, []provider.SendWR{good, write, read}, 2, unix.EINVAL},
		{"atomic on UC", provider.QPTypeUC, []provider.SendWR{atomicWR}, 0, unix.EINVAL},
		{"WRITE on UD", provider.QPTypeUD, []provider.SendWR{write}, 0, unix.EINVAL},
		{"UD send without AH", provider.QPTypeUD, []provider.SendWR{good}, 0, unix.EINVAL},
		{"UD remote QPN over 24 bits", provider.QPTypeUD, []provider.SendWR{mod(good, func(w *provider.SendWR) {
			w.UD = provider.UDDest{AH: ahHolder{&AH{}}, RemoteQPN: 1 << 24}
		})}, 0, unix.EINVAL},
		{"SEND_WITH_INV on UC", provider.QPTypeUC, []provider.SendWR{good, mod(good, func(w *provider.SendWR) { w.Opcode = provider.WRSendWithInv })}, 1, unix.EINVAL},
		{"unknown send flag", provider.QPTypeRC, []provider.SendWR{good, mod(good, func(w *provider.SendWR) { w.Flags = 1 << 4 })}, 1, unix.EINVAL},
		{"SGL over 2 GiB", provider.QPTypeRC, []provider.SendWR{mod(good, func(w *provider.SendWR) {
			w.SGL = []provider.SGE{{Length: 1 << 31}, {Length: 1}}
		})}, 0, unix.EINVAL},
		{"list longer than the queue", provider.QPTypeRC, []provider.SendWR{good, good, good, good, good, good, good, good}, 7, unix.ENOMEM},
	} {
		t.Run(c.name, func(t *testing.T) {
			fk, ctx := testContext(t)
			qp := testQP(t, fk, ctx, qpSpec{typ: c.typ, sqSlots: 8, sqLog2: 8,
				cap: provider.QPCap{MaxSendSGE: 2, MaxRecvSGE: 1, MaxInlineData: 16}})
			q := qp.sq.q
			// Fill the queue memory with a pattern to see any write.
			for i := queueHdrSize; i < len(q.mem); i++ {
				q.mem[i] = 0x5a
			}
			before := append([]byte(nil), q.mem...)
			n, err := qp.PostSend(c.list)
			var we *provider.WRError
			if !errors.As(err, &we) || n != c.index || we.Index != c.index || we.Provider != "rxe" || !errors.Is(err, c.errno) {
				t.Fatalf("PostSend = %d, %v; want index %d and %v", n, err, c.index, c.errno)
			}
			t.Logf("%v", err)
			if !bytes.Equal(before, q.mem) {
				t.Errorf("the queue changed although the list was refused")
			}
			if fk.doorbells.Load() != 0 {
				t.Errorf("a doorbell was rung for a refused list")
			}
			if c.typ == provider.QPTypeUD {
				return
			}
			// The queue still works.
			if n, err := qp.PostSend([]provider.SendWR{good}); n != 1 || err != nil {
				t.Fatalf("good PostSend after a refused one = %d, %v", n, err)
			}
			if q.prod.Load() != 1 || ne.Uint64(slotBytes(q, 0)) != 1 {
				t.Errorf("good WR not at slot 0 (producer %d)", q.prod.Load())
			}
		})
	}
}

// sendShapes are a WR of the general path and one of the plain path
// (send_plain.go), for the tests of what both must refuse alike.
func sendShapes(t *testing.T, qp *QP) map[string][]provider.SendWR {
	t.Helper()
	plain := []provider.SendWR{{Opcode: provider.WRSend, SGL: []provider.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}}
	if !qp.sq.isPlain(&plain[0]) {
		t.Fatal("the plain shape is not plain on this QP")
	}
	return map[string][]provider.SendWR{"general": {{Opcode: provider.WRSend}}, "plain": plain}
}

func TestPostSendNeedsRTS(t *testing.T) {
	fk, c := testContext(t)
	for name, wr := range sendShapes(t, testQP(t, fk, c, qpSpec{})) {
		qp := testQP(t, fk, c, qpSpec{})
		doorbells := fk.doorbells.Load()
		for _, s := range []provider.QPState{provider.QPStateReset, provider.QPStateInit, provider.QPStateRTR} {
			qp.Modified(s)
			if _, err := qp.PostSend(wr); !errors.Is(err, unix.EINVAL) {
				t.Errorf("%s: PostSend in %v: %v, want EINVAL", name, s, err)
			}
		}
		if fk.doorbells.Load() != doorbells || qp.sq.q.prod.Load() != 0 {
			t.Errorf("%s: refused posts moved the queue", name)
		}
		// ERR is allowed: the kernel flushes what is posted there.
		for _, s := range []provider.QPState{provider.QPStateRTS, provider.QPStateSQD, provider.QPStateErr} {
			qp.Modified(s)
			if _, err := qp.PostSend(wr); err != nil {
				t.Errorf("%s: PostSend in %v: %v", name, s, err)
			}
		}
	}
}

func TestPostSendQueueFullAfterWrap(t *testing.T) {
	fk, c := testContext(t)
	for name, wr := range sendShapes(t, testQP(t, fk, c, qpSpec{})) {
		t.Run(name, func(t *testing.T) { testQueueFullAfterWrap(t, testQP(t, fk, c, qpSpec{sqSlots: 4, sqLog2: 8}), wr) })
	}
}

func testQueueFullAfterWrap(t *testing.T, qp *QP, wr []provider.SendWR) {
	q := qp.sq.q
	for round := 0; round < 10; round++ {
		for i := 0; i < 3; i++ {
			if _, err := qp.PostSend(wr); err != nil {
				t.Fatalf("round %d post %d: %v", round, i, err)
			}
		}
		prod := q.prod.Load()
		if _, err := qp.PostSend(wr); !errors.Is(err, unix.ENOMEM) {
			t.Fatalf("round %d: fourth post into 3 usable slots: %v, want ENOMEM", round, err)
		}
		if q.prod.Load() != prod {
			t.Fatalf("round %d: the refused post moved the producer index", round)
		}
		q.cons.Store(q.prod.Load()) // the kernel completes them
	}
}

func TestPostRecvAndSRQ(t *testing.T) {
	fk, c := testContext(t)
	qp := testQP(t, fk, c, qpSpec{cap: provider.QPCap{MaxSendSGE: 1, MaxRecvSGE: 2}, rqSlots: 4, rqLog2: 7})
	wrs := []provider.RecvWR{
		{ID: 0x10, SGL: []provider.SGE{{Addr: 0x1000, Length: 100, LKey: 5}, {Addr: 0x2000, Length: 20, LKey: 6}}},
		{ID: 0x11, SGL: []provider.SGE{{Addr: 0x3000, Length: 7, LKey: 5}}},
	}
	if n, err := qp.PostRecv(wrs); n != 2 || err != nil {
		t.Fatalf("PostRecv = %d, %v", n, err)
	}
	q := qp.rq.q
	w := slotBytes(q, 0)
	if ne.Uint64(w[0:]) != 0x10 || ne.Uint32(w[16:]) != 120 || ne.Uint32(w[20:]) != 120 || ne.Uint32(w[28:]) != 2 ||
		ne.Uint64(w[40:]) != 0x1000 || ne.Uint32(w[48:]) != 100 || ne.Uint32(w[52:]) != 5 || ne.Uint64(w[56:]) != 0x2000 {
		t.Errorf("receive WQE % x", w)
	}
	if q.prod.Load() != 2 || fk.doorbells.Load() != 0 {
		t.Errorf("producer %d, doorbells %d; want 2, 0", q.prod.Load(), fk.doorbells.Load())
	}
	// Too many SGEs in the second request: nothing posted.
	before := append([]byte(nil), q.mem...)
	bad := []provider.RecvWR{wrs[1], {ID: 1, SGL: make([]provider.SGE, 3)}}
	if n, err := qp.PostRecv(bad); n != 1 || !errors.Is(err, unix.EINVAL) {
		t.Errorf("PostRecv with 3 SGEs = %d, %v", n, err)
	}
	// Full: 3 usable slots, 2 used.
	if n, err := qp.PostRecv(wrs); n != 1 || !errors.Is(err, unix.ENOMEM) {
		t.Errorf("PostRecv over capacity = %d, %v", n, err)
	}
	if !bytes.Equal(before, q.mem) {
		t.Errorf("refused receive lists changed the queue")
	}

	// SRQ.
	st, err := c.CreateSRQ(provider.SRQAttr{MaxWR: 7, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, out := st.Udata()
	if len(out) != 24 {
		t.Fatalf("SRQ udata out %d bytes, want 24", len(out))
	}
	mi := fk.addQueue(8, 6)
	putMI(out, mi)
	ne.PutUint32(out[16:], 77)
	ps, err := st.Complete(provider.SRQCreated{Handle: 1, MaxWR: 7, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	srq := ps.(*SRQ)
	defer srq.Close()
	if srq.Num() != 77 {
		t.Errorf("srq_num %d", srq.Num())
	}
	if n, err := srq.PostRecv(wrs[1:]); n != 1 || err != nil {
		t.Fatalf("SRQ PostRecv = %d, %v", n, err)
	}
	if w := slotBytes(srq.rq.q, 0); ne.Uint64(w) != 0x11 || ne.Uint32(w[16:]) != 7 {
		t.Errorf("SRQ WQE % x", w[:64])
	}
	// A QP on an SRQ has no receive queue of its own.
	qp2 := testQP(t, fk, c, qpSpec{srq: true})
	if _, err := qp2.PostRecv(wrs[1:]); !errors.Is(err, unix.EINVAL) {
		t.Errorf("PostRecv on an SRQ QP: %v", err)
	}
	// MODIFY_SRQ carries rxe_modify_srq_cmd{mmap_info_addr 0}.
	if in, out := c.Udata(provider.VerbModifySRQ); len(in) != 8 || out != nil {
		t.Errorf("MODIFY_SRQ udata: %d in, %d out", len(in), len(out))
	}
}

// The fake-queue benchmarks measure the provider's own cost: no kernel, the
// doorbell write goes to the fake (an interface call, no syscall). Compare
// Serial with Parallel for the price of the per-queue mutex under
// contention.
