package siw

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
	"golang.org/x/sys/unix"
)

// TestLayout checks the offsets the package hard-codes against the layouts
// generated from siw-abi.h.
func TestLayout(t *testing.T) {
	want := map[string]map[string]uintptr{
		"siw_sqe": {"flags": uintptr(offFlags), "sge": offSqeSGE, "raddr": 16},
		"siw_rqe": {"flags": uintptr(offRqFlags), "sge": 16},
		"siw_cqe": {"flags": uintptr(offCqFlags), "opcode": uintptr(offCqFlags) + 1, "status": uintptr(offCqFlags) + 2},
	}
	sizes := map[string]int{"siw_sqe": sqeSize, "siw_rqe": rqeSize, "siw_cqe": cqeSize, "siw_cq_ctrl": ctrlSize, "siw_sge": sgeSize}
	seen := 0
	for _, l := range abi.StructLayouts {
		if sz, ok := sizes[l.CName]; ok {
			seen++
			if int(l.Size) != sz {
				t.Errorf("sizeof(%s) = %d, the package uses %d", l.CName, l.Size, sz)
			}
		}
		for _, f := range l.Fields {
			if off, ok := want[l.CName][f.CName]; ok {
				if f.Offset != off {
					t.Errorf("offsetof(%s, %s) = %d, the package uses %d", l.CName, f.CName, f.Offset, off)
				}
				delete(want[l.CName], f.CName)
			}
		}
	}
	if seen != len(sizes) {
		t.Errorf("found %d of the %d siw structs in abi.StructLayouts", seen, len(sizes))
	}
	for s, m := range want {
		for f := range m {
			t.Errorf("%s.%s not found in abi.StructLayouts", s, f)
		}
	}
}

// flagsOf splits an entry's flags word.
func flagsOf(w uint32) (flags uint16, numSGE, op uint8) {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], w)
	return binary.NativeEndian.Uint16(b[:]), b[2], b[3]
}

func TestPostSendEntries(t *testing.T) {
	fk, c := testContext(t)
	qp, sq, _ := testQP(t, fk, c, 8, 8, false, false)
	inline := []byte("inline bytes")
	wrs := []provider.SendWR{
		{ID: 1, Opcode: provider.WRSend, Flags: provider.SendSignaled | provider.SendSolicited,
			SGL: []provider.SGE{{Addr: 0x1000, Length: 10, LKey: 0x11}, {Addr: 0x2000, Length: 20, LKey: 0x22}}},
		{ID: 2, Opcode: provider.WRRDMAWrite, Flags: provider.SendFence, RemoteAddr: 0xabc0, RKey: 0x77,
			SGL: []provider.SGE{{Addr: 0x3000, Length: 30, LKey: 0x33}}},
		{ID: 3, Opcode: provider.WRRDMARead, Flags: provider.SendSignaled, RemoteAddr: 0xdef0, RKey: 0x88,
			SGL: []provider.SGE{{Addr: 0x4000, Length: 40, LKey: 0x44}}},
		{ID: 4, Opcode: provider.WRSendWithInv, InvalidateRKey: 0x1234, SGL: []provider.SGE{{Addr: 0x5000, Length: 5, LKey: 0x55}}},
		{ID: 5, Opcode: provider.WRSend, Flags: provider.SendInline,
			SGL: []provider.SGE{{Addr: userBuf(t, inline), Length: uint32(len(inline))}}},
		{ID: 6, Opcode: provider.WRRDMARead, RemoteAddr: 0x10, RKey: 0x99}, // zero-length READ
	}
	if n, err := qp.PostSend(wrs); n != len(wrs) || err != nil {
		t.Fatalf("PostSend = %d, %v", n, err)
	}
	if got := fk.doorbells.Load(); got != 1 {
		t.Errorf("%d doorbells for a list on an idle queue, want 1", got)
	}
	type want struct {
		flags      uint16
		nsge, op   uint8
		rkey       uint32
		raddr      uint64
		sge0       abi.SiwSge
		sge1Length uint32
	}
	v, sig, sol, fence, inl := uint16(abi.SIW_WQE_VALID), uint16(abi.SIW_WQE_SIGNALLED), uint16(abi.SIW_WQE_SOLICITED), uint16(abi.SIW_WQE_READ_FENCE), uint16(abi.SIW_WQE_INLINE)
	wants := []want{
		{v | sig | sol, 2, abi.SIW_OP_SEND, 0, 0, abi.SiwSge{Laddr: 0x1000, Length: 10, Lkey: 0x11}, 20},
		{v | fence, 1, abi.SIW_OP_WRITE, 0x77, 0xabc0, abi.SiwSge{Laddr: 0x3000, Length: 30, Lkey: 0x33}, 0},
		{v | sig, 1, abi.SIW_OP_READ, 0x88, 0xdef0, abi.SiwSge{Laddr: 0x4000, Length: 40, Lkey: 0x44}, 0},
		{v, 1, abi.SIW_OP_SEND_REMOTE_INV, 0x1234, 0, abi.SiwSge{Laddr: 0x5000, Length: 5, Lkey: 0x55}, 0},
		{v | inl, 1, abi.SIW_OP_SEND, 0, 0, abi.SiwSge{Length: uint32(len(inline))}, 0},
		{v, 1, abi.SIW_OP_READ, 0x99, 0x10, abi.SiwSge{}, 0},
	}
	for i, w := range wants {
		e := sq.sqe(uint32(i))
		f, n, op := flagsOf(sq.word(uint32(i), offFlags).Load())
		if e.Id != wrs[i].ID || f != w.flags || n != w.nsge || op != w.op || e.Rkey != w.rkey || e.Raddr() != w.raddr {
			t.Errorf("entry %d: id %d flags %#x num_sge %d opcode %d rkey %#x raddr %#x; want id %d flags %#x num_sge %d opcode %d rkey %#x raddr %#x",
				i, e.Id, f, n, op, e.Rkey, e.Raddr(), wrs[i].ID, w.flags, w.nsge, w.op, w.rkey, w.raddr)
		}
		if g := sqeSGEs(e)[0]; g != w.sge0 {
			t.Errorf("entry %d: sge[0] %+v, want %+v", i, g, w.sge0)
		}
		if w.sge1Length != 0 && sqeSGEs(e)[1].Length != w.sge1Length {
			t.Errorf("entry %d: sge[1].length %d, want %d", i, sqeSGEs(e)[1].Length, w.sge1Length)
		}
	}
	if got := sqeInline(sq.sqe(4))[:len(inline)]; !bytes.Equal(got, inline) {
		t.Errorf("inline data %q, want %q", got, inline)
	}
}

// TestDoorbellRule: a post rings only if the entry before its first is no
// longer valid (the kernel may be idle), and always when it fills the ring.
func TestDoorbellRule(t *testing.T) {
	fk, c := testContext(t)
	qp, sq, _ := testQP(t, fk, c, 4, 4, false, false)
	send := provider.SendWR{Opcode: provider.WRSend}
	post := func(n int) {
		t.Helper()
		wrs := make([]provider.SendWR, n)
		for i := range wrs {
			wrs[i] = send
		}
		if _, err := qp.PostSend(wrs); err != nil {
			t.Fatal(err)
		}
	}
	var get uint32
	post(1)
	if fk.doorbells.Load() != 1 {
		t.Fatalf("first post: %d doorbells, want 1", fk.doorbells.Load())
	}
	post(1) // entry 0 still valid: the kernel has yet to take it
	if fk.doorbells.Load() != 1 {
		t.Fatalf("post behind a valid entry rang the doorbell (%d)", fk.doorbells.Load())
	}
	kernelTake(sq, &get) // the kernel went through both and stopped
	post(2)
	if fk.doorbells.Load() != 2 {
		t.Fatalf("post after the kernel emptied the queue: %d doorbells, want 2", fk.doorbells.Load())
	}
	kernelTake(sq, &get)
	post(4) // the whole ring
	if fk.doorbells.Load() != 3 {
		t.Fatalf("post of a whole ring: %d doorbells, want 3", fk.doorbells.Load())
	}
}

// ringBytes copies a ring's memory.
func ringBytes(r *ring) []byte { return append([]byte(nil), r.mem...) }

// flagWords copies the flags words of a send or receive ring's entries.
func flagWords(r *ring) []uint32 {
	off := offFlags
	if r.size == uintptr(rqeSize) {
		off = offRqFlags
	}
	w := make([]uint32, r.n)
	for i := range w {
		w[i] = r.word(uint32(i), off).Load()
	}
	return w
}

// TestRefusedLeavesRing: every refusal names the request and its cause and
// leaves the ring's bytes as they were.
func TestRefusedLeavesRing(t *testing.T) {
	fk, c := testContext(t)
	qp, sq, _ := testQP(t, fk, c, 4, 4, false, false)
	ok := provider.SendWR{Opcode: provider.WRSend}
	big := make([]byte, 81)
	bigSGE := provider.SGE{Addr: userBuf(t, big), Length: 81}
	cases := []struct {
		name string
		wr   provider.SendWR
		is   error
	}{
		{"SEND_WITH_IMM", provider.SendWR{Opcode: provider.WRSendWithImm}, provider.ErrNotSupported},
		{"WRITE_WITH_IMM", provider.SendWR{Opcode: provider.WRRDMAWriteWithImm}, provider.ErrNotSupported},
		{"CMP_AND_SWP", provider.SendWR{Opcode: provider.WRAtomicCmpAndSwp, SGL: []provider.SGE{{Length: 8}}}, provider.ErrNotSupported},
		{"FETCH_AND_ADD", provider.SendWR{Opcode: provider.WRAtomicFetchAndAdd, SGL: []provider.SGE{{Length: 8}}}, provider.ErrNotSupported},
		{"LOCAL_INV", provider.SendWR{Opcode: provider.WRLocalInv}, provider.ErrNotSupported},
		{"BIND_MW", provider.SendWR{Opcode: provider.WRBindMW}, provider.ErrNotSupported},
		{"fenced READ", provider.SendWR{Opcode: provider.WRRDMARead, Flags: provider.SendFence, SGL: []provider.SGE{{Length: 8}}}, unix.EINVAL},
		{"READ two SGEs", provider.SendWR{Opcode: provider.WRRDMARead, SGL: []provider.SGE{{Length: 8}, {Length: 8}}}, unix.EINVAL},
		{"inline SEND_WITH_INV", provider.SendWR{Opcode: provider.WRSendWithInv, Flags: provider.SendInline}, unix.EINVAL},
		{"81 bytes inline", provider.SendWR{Opcode: provider.WRSend, Flags: provider.SendInline, SGL: []provider.SGE{bigSGE}}, unix.EINVAL},
		{"7 SGEs", provider.SendWR{Opcode: provider.WRSend, SGL: make([]provider.SGE, 7)}, unix.EINVAL},
		{"unknown flag", provider.SendWR{Opcode: provider.WRSend, Flags: 1 << 6}, unix.EINVAL},
	}
	before := ringBytes(sq)
	for _, tc := range cases {
		n, err := qp.PostSend([]provider.SendWR{ok, tc.wr})
		var we *WRError
		if n != 1 || !errors.As(err, &we) || we.Index != 1 || !errors.Is(err, tc.is) {
			t.Errorf("%s: PostSend = %d, %v; want 1 and a WRError for request 1 wrapping %v", tc.name, n, err, tc.is)
		}
	}
	if !bytes.Equal(before, ringBytes(sq)) || fk.doorbells.Load() != 0 {
		t.Fatalf("refused lists changed the ring or rang the doorbell (%d)", fk.doorbells.Load())
	}
	// Full: 4 entries, the kernel takes none.
	if _, err := qp.PostSend([]provider.SendWR{ok, ok, ok}); err != nil {
		t.Fatal(err)
	}
	before = ringBytes(sq)
	n, err := qp.PostSend([]provider.SendWR{ok, ok})
	var we *WRError
	if n != 1 || !errors.As(err, &we) || we.Index != 1 || !errors.Is(err, unix.ENOMEM) {
		t.Errorf("PostSend on 1 free entry of 4 = %d, %v; want 1 and ENOMEM for request 1", n, err)
	}
	if !bytes.Equal(before, ringBytes(sq)) {
		t.Error("a list refused for room changed the ring")
	}
	// RESET, then ERR, which sticks (siw ignores a RESET after ERR).
	for _, st := range []provider.QPState{provider.QPStateReset, provider.QPStateErr, provider.QPStateReset} {
		qp.Modified(st)
		if n, err := qp.PostSend([]provider.SendWR{ok}); n != 0 || !errors.Is(err, unix.EINVAL) {
			t.Errorf("PostSend after Modified(%v) = %d, %v; want 0 and EINVAL", st, n, err)
		}
	}
	if qp.State() != provider.QPStateErr {
		t.Errorf("state after ERR and RESET: %v, want ERR", qp.State())
	}
	if n, err := qp.PostRecv([]provider.RecvWR{{}}); n != 0 || !errors.Is(err, unix.EINVAL) {
		t.Errorf("PostRecv in ERR = %d, %v; want 0 and EINVAL", n, err)
	}
}

// TestDoorbellRefusedWithdraws: a doorbell the kernel refuses (ENOTCONN:
// no connection yet) takes the entries back; the next post reuses them.
func TestDoorbellRefusedWithdraws(t *testing.T) {
	fk, c := testContext(t)
	qp, sq, _ := testQP(t, fk, c, 4, 4, false, false)
	fk.dbErr = unix.ENOTCONN
	wrs := []provider.SendWR{{ID: 1, Opcode: provider.WRSend}, {ID: 2, Opcode: provider.WRSend}}
	n, err := qp.PostSend(wrs)
	var we *WRError
	if n != 0 || !errors.As(err, &we) || !errors.Is(err, unix.ENOTCONN) {
		t.Fatalf("PostSend with a refused doorbell = %d, %v; want 0 and a WRError wrapping ENOTCONN", n, err)
	}
	for i := uint32(0); i < 4; i++ {
		if sq.word(i, offFlags).Load()&wqeValid != 0 {
			t.Errorf("entry %d still valid after the withdrawal", i)
		}
	}
	fk.dbErr = nil
	if n, err := qp.PostSend(wrs[:1]); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if sq.sqe(0).Id != 1 || sq.word(0, offFlags).Load()&wqeValid == 0 {
		t.Error("the post after a withdrawal did not reuse entry 0")
	}
	var get uint32
	kernelTake(sq, &get)
	// The kernel takes an entry before the doorbell fails: it cannot
	// come back, and the list stays posted.
	fk.dbErr = unix.ENOTCONN
	fk.onDoorbell = func(uint32) {
		sq.word(get, offFlags).Store(0)
		get++
	}
	n, err = qp.PostSend(wrs)
	var de *DoorbellError
	if n != 2 || !errors.As(err, &de) || de.Posted != 2 || !errors.Is(err, unix.ENOTCONN) {
		t.Fatalf("PostSend whose doorbell fails after the kernel took an entry = %d, %v; want 2 and a DoorbellError", n, err)
	}
}

func TestPostRecv(t *testing.T) {
	fk, c := testContext(t)
	qp, _, rq := testQP(t, fk, c, 4, 4, false, false)
	wrs := []provider.RecvWR{
		{ID: 10, SGL: []provider.SGE{{Addr: 0x1000, Length: 100, LKey: 1}, {Addr: 0x2000, Length: 200, LKey: 2}}},
		{ID: 11},
	}
	if n, err := qp.PostRecv(wrs); n != 2 || err != nil {
		t.Fatal(n, err)
	}
	e := rq.rqe(0)
	f, nsge, _ := flagsOf(rq.word(0, offRqFlags).Load())
	if e.Id != 10 || f != abi.SIW_WQE_VALID || nsge != 2 || e.Sge[1] != (abi.SiwSge{Laddr: 0x2000, Length: 200, Lkey: 2}) {
		t.Errorf("rqe 0: id %d flags %#x num_sge %d sge[1] %+v", e.Id, f, nsge, e.Sge[1])
	}
	if f, nsge, _ := flagsOf(rq.word(1, offRqFlags).Load()); f != abi.SIW_WQE_VALID || nsge != 0 {
		t.Errorf("rqe 1: flags %#x num_sge %d", f, nsge)
	}
	// Refused lists hand nothing to the kernel: no flags word changes
	// (the free entries' other bytes are ours and may have been
	// written), and the next post goes where the refused one would have.
	before := flagWords(rq)
	n, err := qp.PostRecv([]provider.RecvWR{{ID: 1}, {ID: 2}, {ID: 3}})
	if n != 2 || !errors.Is(err, unix.ENOMEM) || !slices.Equal(before, flagWords(rq)) {
		t.Errorf("PostRecv of 3 into 2 free entries = %d, %v (flags %#x, were %#x)", n, err, flagWords(rq), before)
	}
	if n, err := qp.PostRecv([]provider.RecvWR{{ID: 1}, {SGL: make([]provider.SGE, 7)}}); n != 1 || !errors.Is(err, unix.EINVAL) {
		t.Errorf("PostRecv with 7 SGEs in request 1 = %d, %v", n, err)
	}
	huge := []provider.SGE{{Addr: 1, Length: 1 << 31, LKey: 1}, {Addr: 2, Length: 1, LKey: 1}}
	if n, err := qp.PostRecv([]provider.RecvWR{{ID: 1}, {SGL: huge}}); n != 1 || !errors.Is(err, unix.EINVAL) {
		t.Errorf("PostRecv of 2^31+1 bytes in request 1 = %d, %v", n, err)
	}
	one := []provider.SGE{{Addr: 1, Length: 1<<31 + 1, LKey: 1}} // one SGE: post's loop-free path
	if n, err := qp.PostRecv([]provider.RecvWR{{ID: 1}, {SGL: one}}); n != 1 || !errors.Is(err, unix.EINVAL) {
		t.Errorf("PostRecv of one 2^31+1-byte SGE in request 1 = %d, %v", n, err)
	}
	if !slices.Equal(before, flagWords(rq)) {
		t.Errorf("refused lists changed flags words: %#x, were %#x", flagWords(rq), before)
	}
	rq.word(0, offRqFlags).Store(0) // the kernel took entry 0
	sge := provider.SGE{Addr: 0x3000, Length: 1 << 31, LKey: 3}
	if n, err := qp.PostRecv([]provider.RecvWR{{ID: 12, SGL: []provider.SGE{sge}}}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if f, nsge, _ := flagsOf(rq.word(2, offRqFlags).Load()); rq.rqe(2).Id != 12 || f != abi.SIW_WQE_VALID || nsge != 1 ||
		rq.rqe(2).Sge[0] != (abi.SiwSge{Laddr: 0x3000, Length: 1 << 31, Lkey: 3}) {
		t.Errorf("the post after the refusals: rqe 2 id %d flags %#x num_sge %d sge[0] %+v; want id 12, valid, the SGE",
			rq.rqe(2).Id, f, nsge, rq.rqe(2).Sge[0])
	}
	if fk.doorbells.Load() != 0 {
		t.Error("PostRecv made a syscall")
	}
}

func TestSRQ(t *testing.T) {
	fk, c := testContext(t)
	st, err := c.CreateSRQ(provider.SRQAttr{MaxWR: 4, MaxSGE: 2})
	if err != nil {
		t.Fatal(err)
	}
	_, out := st.Udata()
	key := fk.addRing(4 * rqeSize)
	resp := abi.SiwUrespCreateSrq{NumRqe: 4, SrqKey: key}
	copy(out, abi.Bytes(&resp))
	ps, err := st.Complete(provider.SRQCreated{MaxWR: 4, MaxSGE: 2})
	if err != nil {
		t.Fatal(err)
	}
	srq := ps.(*SRQ)
	r := fk.ringAt(key, 4, rqeSize, 0)
	if n, err := srq.PostRecv([]provider.RecvWR{{ID: 5, SGL: []provider.SGE{{Addr: 1, Length: 2, LKey: 3}}}}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if r.rqe(0).Id != 5 || r.word(0, offRqFlags).Load()&wqeValid == 0 {
		t.Error("SRQ entry 0 not written")
	}
	if n, err := srq.PostRecv([]provider.RecvWR{{SGL: make([]provider.SGE, 3)}}); n != 0 || !errors.Is(err, unix.EINVAL) {
		t.Errorf("SRQ PostRecv with 3 SGEs (max 2) = %d, %v", n, err)
	}
	qp, _, _ := testQP(t, fk, c, 4, 0, true, false)
	if n, err := qp.PostRecv([]provider.RecvWR{{}}); n != 0 || !errors.Is(err, unix.EINVAL) {
		t.Errorf("PostRecv on a QP with an SRQ = %d, %v", n, err)
	}
	srq.Close()
	if _, err := srq.PostRecv([]provider.RecvWR{{}}); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("PostRecv on a closed SRQ: %v", err)
	}
}

func TestSignalAll(t *testing.T) {
	fk, c := testContext(t)
	qp, sq, _ := testQP(t, fk, c, 4, 4, false, true)
	if _, err := qp.PostSend([]provider.SendWR{{Opcode: provider.WRSend}}); err != nil {
		t.Fatal(err)
	}
	if f, _, _ := flagsOf(sq.word(0, offFlags).Load()); f&abi.SIW_WQE_SIGNALLED == 0 {
		t.Errorf("flags %#x: a QP that signals all did not set SIW_WQE_SIGNALLED", f)
	}
}

func TestPollArm(t *testing.T) {
	fk, c := testContext(t)
	cq, k := testCQ(t, fk, c, 4)
	wc := make([]provider.WorkCompletion, 4)
	if n, err := cq.Poll(wc); n != 0 || err != nil {
		t.Fatalf("Poll of an empty CQ = %d, %v", n, err)
	}
	kernelComplete(k, 0, 1, abi.SIW_OP_SEND, abi.SIW_WC_SUCCESS, 100, 9)
	kernelComplete(k, 1, 2, abi.SIW_OP_RECEIVE, abi.SIW_WC_WR_FLUSH_ERR, 0, 9)
	kernelComplete(k, 2, 3, abi.SIW_OP_READ, abi.SIW_WC_REM_ACCESS_ERR, 0, 10)
	n, err := cq.Poll(wc[:2])
	if n != 2 || err != nil {
		t.Fatalf("Poll = %d, %v", n, err)
	}
	n2, _ := cq.Poll(wc[2:])
	if n2 != 1 {
		t.Fatalf("second Poll = %d, want 1", n2)
	}
	want := []provider.WorkCompletion{
		{ID: 1, Status: provider.WCSuccess, Opcode: provider.WCSend, ByteLen: 100, QPNum: 9},
		{ID: 2, Status: provider.WCWRFlushErr, Opcode: provider.WCRecv, QPNum: 9},
		{ID: 3, Status: provider.WCRemAccessErr, Opcode: provider.WCRDMARead, QPNum: 10},
	}
	for i, w := range want {
		if wc[i] != w {
			t.Errorf("completion %d: %+v, want %+v", i, wc[i], w)
		}
	}
	for i := uint32(0); i < 3; i++ {
		if k.word(i, offCqFlags).Load() != 0 {
			t.Errorf("CQE %d not handed back", i)
		}
	}
	// The ring wraps: entries 3, 0.
	kernelComplete(k, 3, 4, abi.SIW_OP_WRITE, 0, 1, 9)
	kernelComplete(k, 4, 5, abi.SIW_OP_WRITE, 0, 1, 9)
	if n, _ := cq.Poll(wc); n != 2 || wc[0].ID != 4 || wc[1].ID != 5 || wc[1].Opcode != provider.WCRDMAWrite {
		t.Errorf("Poll across the wrap = %d, %+v", n, wc[:n])
	}
	if err := cq.Arm(false); err != nil || k.ctrl().Load() != abi.SIW_NOTIFY_SOLICITED|abi.SIW_NOTIFY_NEXT_COMPLETION {
		t.Errorf("Arm(false) = %v, notify word %#x", err, k.ctrl().Load())
	}
	if err := cq.Arm(true); err != nil || k.ctrl().Load() != abi.SIW_NOTIFY_SOLICITED {
		t.Errorf("Arm(true) = %v, notify word %#x", err, k.ctrl().Load())
	}
	if fk.doorbells.Load() != 0 {
		t.Error("Poll or Arm made a syscall")
	}
	cq.Close()
	if _, err := cq.Poll(wc); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("Poll after Close: %v", err)
	}
	if err := cq.Arm(false); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("Arm after Close: %v", err)
	}
	if _, err := cq.Resize(8); !errors.Is(err, provider.ErrNotSupported) {
		t.Errorf("Resize: %v", err)
	}
}

// TestCloseWaitsForReaders: Close unmaps the ring only once the Poll in
// the old state's gate, or an Arm counted on it, has left; meanwhile new
// ones see the CQ closed and do not touch the ring.
func TestCloseWaitsForReaders(t *testing.T) {
	for _, poll := range []bool{false, true} {
		fk, c := testContext(t)
		cq, _ := testCQ(t, fk, c, 4)
		s := cq.st.Load()
		r := s.r
		enter, exit := cq.enter, func(s *cqState) { s.readers.Add(-1) }
		if poll {
			enter, exit = cq.enterPoll, func(s *cqState) { s.gate.Leave() }
		}
		if !enter(s) { // a Poll or Arm between its check and its last access
			t.Fatalf("poll %v: enter refused the current state", poll)
		}
		var held atomic.Bool
		held.Store(true)
		leave := func() { // the reader leaves, once
			if held.Swap(false) {
				exit(s)
			}
		}
		// On a failure below the reader must still leave, or testCQ's cleanup
		// (run after this one) waits in Close for ever.
		t.Cleanup(leave)
		done := make(chan error, 1)
		go func() { done <- cq.Close() }()
		// Close swaps the state first, then waits; how soon its goroutine
		// gets there depends on the machine, so wait for the swap itself
		// (checking the new state's refusals before it would count a second
		// reader that nothing removes).
		for deadline := time.Now().Add(10 * time.Second); cq.st.Load() == s; {
			select {
			case err := <-done:
				t.Fatalf("poll %v: Close returned (%v) while a reader was inside", poll, err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("poll %v: Close did not replace the state in 10 s", poll)
			}
			time.Sleep(time.Millisecond)
		}
		select {
		case err := <-done:
			t.Fatalf("poll %v: Close returned (%v) while a reader was inside", poll, err)
		case <-time.After(20 * time.Millisecond):
		}
		if r.mem == nil {
			t.Fatalf("poll %v: the ring was unmapped under a reader", poll)
		}
		wc := make([]provider.WorkCompletion, 1)
		if _, err := cq.Poll(wc); !errors.Is(err, provider.ErrClosed) {
			t.Errorf("poll %v: Poll during Close's wait: %v", poll, err)
		}
		if err := cq.Arm(false); !errors.Is(err, provider.ErrClosed) {
			t.Errorf("poll %v: Arm during Close's wait: %v", poll, err)
		}
		if cq.enter(s) {
			t.Errorf("poll %v: enter accepted a replaced state", poll)
			s.readers.Add(-1)
		}
		leave()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if r.mem != nil || s.readers.Load() != 0 || s.gate.Busy() {
			t.Errorf("poll %v: after the wait: ring mapped %v, readers %d, gate busy %v", poll, r.mem != nil, s.readers.Load(), s.gate.Busy())
		}
	}
}

func TestClosedQP(t *testing.T) {
	fk, c := testContext(t)
	qp, _, _ := testQP(t, fk, c, 4, 4, false, false)
	qp.Close()
	if _, err := qp.PostSend([]provider.SendWR{{Opcode: provider.WRSend}}); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("PostSend after Close: %v", err)
	}
	if _, err := qp.PostRecv([]provider.RecvWR{{}}); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("PostRecv after Close: %v", err)
	}
	if _, err := c.CreateQP(provider.QPAttr{Type: provider.QPTypeUD}); !errors.Is(err, provider.ErrNotSupported) {
		t.Errorf("CreateQP(UD): %v", err)
	}
}

// TestDeviceLost: once the device is gone (the kernel answers EIO) every
// fast-path call fails with EIO and leaves the rings as they were; a
// DEVICE_FATAL on a context the kernel keeps working changes nothing.
func TestDeviceLost(t *testing.T) {
	fk, c := testContext(t)
	qp, sq, rq := testQP(t, fk, c, 4, 4, false, false)
	qp.Modified(provider.QPStateRTS)
	cq, k := testCQ(t, fk, c, 4)
	st, err := c.CreateSRQ(provider.SRQAttr{MaxWR: 4, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, out := st.Udata()
	key := fk.addRing(4 * rqeSize)
	copy(out, abi.Bytes(&abi.SiwUrespCreateSrq{NumRqe: 4, SrqKey: key}))
	ps, err := st.Complete(provider.SRQCreated{MaxWR: 4, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	srq := ps.(*SRQ)
	sr := fk.ringAt(key, 4, rqeSize, 0)
	k.word(0, offCqFlags).Store(binary.NativeEndian.Uint32([]byte{abi.SIW_WQE_VALID, 0, 0, 0}))
	before := [][]byte{bytes.Clone(sq.mem), bytes.Clone(rq.mem), bytes.Clone(k.mem), bytes.Clone(sr.mem)}
	fk.dbErr = unix.EINVAL // not disassociated: the kernel refuses the probe's handle
	c.DeviceLost()
	if _, err := qp.PostRecv([]provider.RecvWR{{ID: 1}}); err != nil {
		t.Fatalf("PostRecv after DeviceLost on a context still associated: %v", err)
	}
	rq.word(0, offRqFlags).Store(0)
	before[1] = bytes.Clone(rq.mem)
	fk.dbErr = unix.EIO // disassociated
	c.DeviceLost()
	dbs := fk.doorbells.Load()
	var we *WRError
	if n, err := qp.PostSend([]provider.SendWR{{Opcode: provider.WRSend}}); n != 0 || !errors.Is(err, unix.EIO) || !errors.As(err, &we) {
		t.Errorf("PostSend after DeviceLost: %d, %v; want a WRError wrapping EIO", n, err)
	}
	if n, err := qp.PostRecv([]provider.RecvWR{{}}); n != 0 || !errors.Is(err, unix.EIO) || !errors.As(err, &we) {
		t.Errorf("PostRecv after DeviceLost: %d, %v; want a WRError wrapping EIO", n, err)
	}
	if n, err := srq.PostRecv([]provider.RecvWR{{}}); n != 0 || !errors.Is(err, unix.EIO) {
		t.Errorf("SRQ PostRecv after DeviceLost: %d, %v; want EIO", n, err)
	}
	if n, err := cq.Poll(make([]provider.WorkCompletion, 4)); n != 0 || !errors.Is(err, unix.EIO) {
		t.Errorf("Poll after DeviceLost: %d, %v; want EIO", n, err)
	}
	if err := cq.Arm(false); !errors.Is(err, unix.EIO) {
		t.Errorf("Arm after DeviceLost: %v; want EIO", err)
	}
	for i, m := range [][]byte{sq.mem, rq.mem, k.mem, sr.mem} {
		if !bytes.Equal(m, before[i]) {
			t.Errorf("ring %d changed after DeviceLost", i)
		}
	}
	if d := fk.doorbells.Load() - dbs; d != 0 {
		t.Errorf("%d doorbell writes after DeviceLost", d)
	}
}

// TestFastPathAllocs: PostSend, PostRecv and Poll allocate nothing.
func TestFastPathAllocs(t *testing.T) {
	fk, c := testContext(t)
	qp, sq, rq := testQP(t, fk, c, 16, 16, false, false)
	cq, k := testCQ(t, fk, c, 16)
	var sget, rget, cput uint32
	send := []provider.SendWR{{ID: 1, Opcode: provider.WRSend, Flags: provider.SendSignaled, SGL: []provider.SGE{{Addr: 1, Length: 8, LKey: 2}}}}
	recv := []provider.RecvWR{{ID: 2, SGL: []provider.SGE{{Addr: 1, Length: 8, LKey: 2}}}}
	wc := make([]provider.WorkCompletion, 4)
	a := testing.AllocsPerRun(200, func() {
		if _, err := qp.PostSend(send); err != nil {
			t.Fatal(err)
		}
		kernelTake(sq, &sget)
		if _, err := qp.PostRecv(recv); err != nil {
			t.Fatal(err)
		}
		rq.word(rget, offRqFlags).Store(0)
		rget++
		kernelComplete(k, cput, 1, abi.SIW_OP_SEND, 0, 8, 9)
		cput++
		if n, err := cq.Poll(wc); n != 1 || err != nil {
			t.Fatal(n, err)
		}
	})
	if a != 0 {
		t.Errorf("%v allocations per PostSend+PostRecv+Poll, want 0", a)
	}
}
