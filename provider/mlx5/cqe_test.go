package mlx5

import (
	"testing"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/provider/mlx5/internal/mlx5dv"
)

// cset writes member m of C struct s in e, big-endian, by the C layout
// table: CQEs built independently of the parser's offsets.
func cset(t testing.TB, e []byte, s, m string, v uint64) {
	t.Helper()
	off, size, ok := mlx5dv.Member(s, m)
	if !ok {
		t.Fatalf("no C member %s.%s", s, m)
	}
	for i := int(size) - 1; i >= 0; i-- {
		e[int(off)+i] = byte(v)
		v >>= 8
	}
}

// testCQ is a CQ with one QP (with a send and a receive ring) and one SRQ
// registered in its context, without a kernel.
type testCQ struct {
	ctx *context
	cq  *cq
	qp  *qp
	srq *srq
}

const (
	tQPN     = 0x000abc
	tQPUidx  = 5
	tSRQUidx = 6
)

func newTestCQ(t testing.TB, cqeSize int, version uint8, log uint32) *testCQ {
	t.Helper()
	c := &context{cqeVersion: version, cqeSize: cqeSize}
	n := 1 << log
	mem, err := mmap.Anonymous(n*cqeSize + dbRecSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	q := &cq{ctx: c, dbMem: mem, mem: mem, cqeSize: cqeSize, dbrec: n * cqeSize, cqn: 1,
		ciRec: word(mem, n*cqeSize+4*cqDBSetCI)}
	q.setRing(mem.Bytes()[:n*cqeSize], log)
	for i := 0; i < n; i++ {
		q.buf[i*cqeSize+cqeSize-cqe64Size+cqeOpOwn] = cqeInvalid << 4
	}
	p := &qp{ctx: c, typ: provider.QPTypeRC, qpn: tQPN, uidx: tQPUidx}
	p.sq = sendQueue{cnt: 16, slots: make([]sendSlot, 16)}
	p.rq = recvQueue{cnt: 8, wrid: make([]uint64, 8)}
	for i := range p.sq.slots {
		p.sq.slots[i].wrid = 0x5000 + uint64(i)
		p.sq.slots[i].next = uint32(i) + 1
	}
	for i := range p.rq.wrid {
		p.rq.wrid[i] = 0x7000 + uint64(i)
	}
	// Everything counts as outstanding: the producers are far ahead.
	p.sq.pub.Store(1 << 20)
	p.rq.pub.Store(1 << 20)
	smem, err := mmap.Anonymous(4*64 + dbRecSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { smem.Close() })
	s := &srq{ctx: c, mem: smem, ring: smem.Bytes()[:256], shift: 6, cnt: 4, wrid: []uint64{0x9000, 0x9001, 0x9002, 0x9003}, tail: 3, uidx: tSRQUidx}
	if version == 1 {
		c.rsc.set(tQPUidx, &rsc{qp: p})
		c.rsc.set(tSRQUidx, &rsc{srq: s})
	} else {
		c.rsc.set(tQPN, &rsc{qp: p})
	}
	return &testCQ{ctx: c, cq: q, qp: p, srq: s}
}

// put writes CQE number i (free-running) with the owner bit of its pass.
func (tc *testCQ) put(t testing.TB, i uint32, fill func(e []byte)) []byte {
	q := tc.cq
	off := int(i&(1<<q.log-1))*q.cqeSize + q.cqeSize - cqe64Size
	e := q.buf[off : off+cqe64Size]
	clear(e)
	fill(e)
	e[cqeOpOwn] = e[cqeOpOwn]&^1 | byte(i>>q.log)&1
	return e
}

const cqe = "mlx5_cqe64"

func TestGoldenCQEs(t *testing.T) {
	type kind struct {
		name string
		fill func(t *testing.T, e []byte)
		want provider.WorkCompletion
	}
	req := func(op uint8, counter uint16, bytes uint32) func(t *testing.T, e []byte) {
		return func(t *testing.T, e []byte) {
			cset(t, e, cqe, "srqn_uidx", tQPUidx)
			cset(t, e, cqe, "sop_drop_qpn", uint64(op)<<24|tQPN)
			cset(t, e, cqe, "wqe_counter", uint64(counter))
			cset(t, e, cqe, "byte_cnt", uint64(bytes))
			cset(t, e, cqe, "op_own", cqeReq<<4)
		}
	}
	resp := func(op uint8, uidx uint32, bytes, imm uint32, flagsRqpn uint32) func(t *testing.T, e []byte) {
		return func(t *testing.T, e []byte) {
			cset(t, e, cqe, "srqn_uidx", uint64(uidx))
			cset(t, e, cqe, "sop_drop_qpn", tQPN)
			cset(t, e, cqe, "byte_cnt", uint64(bytes))
			cset(t, e, cqe, "imm_inval_pkey", uint64(imm))
			cset(t, e, cqe, "flags_rqpn", uint64(flagsRqpn))
			cset(t, e, cqe, "slid", 0x33)
			cset(t, e, cqe, "ml_path", 0x81)
			cset(t, e, cqe, "wqe_counter", 2)
			cset(t, e, cqe, "op_own", uint64(op)<<4)
		}
	}
	errCQE := func(op uint8, syndrome, vendor uint8, counter uint16) func(t *testing.T, e []byte) {
		return func(t *testing.T, e []byte) {
			cset(t, e, "mlx5_err_cqe", "srqn", tQPUidx)
			cset(t, e, "mlx5_err_cqe", "s_wqe_opcode_qpn", tQPN)
			cset(t, e, "mlx5_err_cqe", "syndrome", uint64(syndrome))
			cset(t, e, "mlx5_err_cqe", "vendor_err_synd", uint64(vendor))
			cset(t, e, "mlx5_err_cqe", "wqe_counter", uint64(counter))
			cset(t, e, "mlx5_err_cqe", "op_own", uint64(op)<<4)
		}
	}
	w := func(id uint64, op provider.WCOpcode, n uint32) provider.WorkCompletion {
		return provider.WorkCompletion{ID: id, Opcode: op, ByteLen: n, QPNum: tQPN}
	}
	recv := func(id uint64, op provider.WCOpcode, n uint32, flags provider.WCFlags, imm uint32) provider.WorkCompletion {
		return provider.WorkCompletion{ID: id, Opcode: op, ByteLen: n, QPNum: tQPN, Flags: flags | provider.WCWithGRH, Imm: imm,
			SrcQP: 0x123, SL: 4, SLID: 0x33, DLIDPathBits: 1}
	}
	const fr = 1<<28 | 4<<24 | 0x123
	kinds := []kind{
		{"req_send", req(opSend, 0, 0), w(0x5000, provider.WCSend, 0)},
		{"req_send_imm", req(opSendImm, 1, 0), w(0x5001, provider.WCSend, 0)},
		{"req_send_inv", req(opSendInval, 2, 0), w(0x5002, provider.WCSend, 0)},
		{"req_rdma_write", req(opRDMAWrite, 3, 0), w(0x5003, provider.WCRDMAWrite, 0)},
		{"req_rdma_write_imm", req(opRDMAWriteIm, 4, 0), w(0x5004, provider.WCRDMAWrite, 0)},
		{"req_rdma_read", req(opRDMARead, 5, 4096), w(0x5005, provider.WCRDMARead, 4096)},
		{"req_atomic_cs", req(opAtomicCS, 6, 8), w(0x5006, provider.WCCompSwap, 8)},
		{"req_atomic_fa", req(opAtomicFA, 0x0017, 8), w(0x5007, provider.WCFetchAdd, 8)},
		{"resp_send", resp(cqeRespSend, tQPUidx, 100, 0x0005, fr), func() provider.WorkCompletion {
			c := recv(0x7000, provider.WCRecv, 100, 0, 0)
			c.PKeyIndex = 5
			return c
		}()},
		{"resp_send_imm", resp(cqeRespSendIm, tQPUidx, 7, 0xcafef00d, fr), recv(0x7001, provider.WCRecv, 7, provider.WCWithImm, 0xcafef00d)},
		{"resp_send_inv", resp(cqeRespSendIv, tQPUidx, 8, 0x4242, fr), recv(0x7002, provider.WCRecv, 8, provider.WCWithInv, 0x4242)},
		{"resp_rdma_write_imm", resp(cqeRespWrImm, tQPUidx, 4096, 0x01020304, fr), recv(0x7003, provider.WCRecvRDMAWithImm, 4096, provider.WCWithImm, 0x01020304)},
		{"resp_send_srq", resp(cqeRespSend, tSRQUidx, 64, 0, fr), func() provider.WorkCompletion {
			c := recv(0x9002, provider.WCRecv, 64, 0, 0)
			return c
		}()},
		{"req_err_remote_access", errCQE(cqeReqErr, mlx5dv.MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, 0x88, 9),
			provider.WorkCompletion{ID: 0x5009, Status: provider.WCRemAccessErr, VendorErr: 0x88, QPNum: tQPN}},
		{"req_err_flush", errCQE(cqeReqErr, mlx5dv.MLX5_CQE_SYNDROME_WR_FLUSH_ERR, 0, 10),
			provider.WorkCompletion{ID: 0x500a, Status: provider.WCWRFlushErr, QPNum: tQPN}},
		{"resp_err_flush", errCQE(cqeRespErr, mlx5dv.MLX5_CQE_SYNDROME_WR_FLUSH_ERR, 0, 0),
			provider.WorkCompletion{ID: 0x7004, Status: provider.WCWRFlushErr, Opcode: provider.WCRecv, QPNum: tQPN}},
		{"req_err_retry", errCQE(cqeReqErr, mlx5dv.MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR, 0, 11),
			provider.WorkCompletion{ID: 0x500b, Status: provider.WCRetryExcErr, QPNum: tQPN}},
		{"req_err_unknown_syndrome", errCQE(cqeReqErr, 0x7f, 0, 12),
			provider.WorkCompletion{ID: 0x500c, Status: provider.WCGeneralErr, QPNum: tQPN}},
	}
	for _, size := range []int{64, 128} {
		tc := newTestCQ(t, size, 1, 5)
		for i, k := range kinds {
			e := tc.put(t, uint32(i), func(e []byte) { k.fill(t, e) })
			if size == 64 {
				golden(t, "cqe/"+k.name+".hex", e)
			}
			var wc [2]provider.WorkCompletion
			n, err := tc.cq.Poll(wc[:])
			if err != nil || n != 1 {
				t.Fatalf("%s (%d-byte CQEs): Poll = %d, %v", k.name, size, n, err)
			}
			if wc[0] != k.want {
				t.Errorf("%s (%d-byte CQEs):\n got %+v\nwant %+v", k.name, size, wc[0], k.want)
			}
		}
		if got := be.Uint32(tc.cq.mem.Bytes()[tc.cq.dbrec:]); got != uint32(len(kinds)) {
			t.Errorf("consumer index in the doorbell record = %d, want %d", got, len(kinds))
		}
	}
}

// TestCQOwnership walks a small CQ through several passes: a CQE is new
// only with its pass's owner bit, and an INVALID opcode is never new.
func TestCQOwnership(t *testing.T) {
	tc := newTestCQ(t, 64, 1, 2) // 4 entries
	var wc [8]provider.WorkCompletion
	if n, _ := tc.cq.Poll(wc[:]); n != 0 {
		t.Fatalf("fresh CQ polled %d", n)
	}
	ctr := uint16(0)
	for pass := uint32(0); pass < 5; pass++ {
		for i := uint32(0); i < 4; i++ {
			tc.put(t, pass*4+i, func(e []byte) {
				cset(t, e, cqe, "srqn_uidx", tQPUidx)
				cset(t, e, cqe, "sop_drop_qpn", tQPN)
				cset(t, e, cqe, "wqe_counter", uint64(ctr))
				cset(t, e, cqe, "op_own", cqeReq<<4)
			})
			ctr++
		}
		n, err := tc.cq.Poll(wc[:])
		if n != 4 || err != nil {
			t.Fatalf("pass %d: polled %d, %v", pass, n, err)
		}
		// The slots still hold this pass's CQEs: not new for the next pass.
		if n, _ := tc.cq.Poll(wc[:]); n != 0 {
			t.Fatalf("pass %d: stale CQEs polled again (%d)", pass, n)
		}
	}
	// The unsignaled WQEs before a completed one are retired with it.
	tc.qp.sq.slots[3].next = 9
	tc.put(t, 20, func(e []byte) {
		cset(t, e, cqe, "srqn_uidx", tQPUidx)
		cset(t, e, cqe, "wqe_counter", 3)
		cset(t, e, cqe, "op_own", cqeReq<<4)
	})
	tc.cq.Poll(wc[:1])
	if got := tc.qp.sq.tail.Load(); got != 9 {
		t.Errorf("send tail after a CQE for WQE 3 = %d, want 9", got)
	}
}

// TestStaleCompletion: a CQE for a WQE that is not outstanding (left over
// from before a reset) is skipped and moves no tail.
func TestStaleCompletion(t *testing.T) {
	tc := newTestCQ(t, 64, 1, 3)
	tc.qp.sq.pub.Store(4)
	tc.qp.sq.tail.Store(2)
	tc.qp.rq.pub.Store(5)
	tc.qp.rq.tail.Store(5)
	for i, c := range []uint16{1, 4, 9} { // before the tail, at the head, beyond it
		tc.put(t, uint32(i), func(e []byte) {
			cset(t, e, cqe, "srqn_uidx", tQPUidx)
			cset(t, e, cqe, "wqe_counter", uint64(c))
			cset(t, e, cqe, "op_own", cqeReq<<4)
		})
	}
	tc.put(t, 3, func(e []byte) {
		cset(t, e, cqe, "srqn_uidx", tQPUidx)
		cset(t, e, cqe, "op_own", cqeRespSend<<4)
	})
	var wc [8]provider.WorkCompletion
	if n, err := tc.cq.Poll(wc[:]); n != 0 || err != nil || tc.cq.stray != 4 {
		t.Fatalf("Poll = %d, %v, %d stray; want 0, nil, 4", n, err, tc.cq.stray)
	}
	if tc.qp.sq.tail.Load() != 2 || tc.qp.rq.tail.Load() != 5 {
		t.Errorf("tails moved: %d, %d", tc.qp.sq.tail.Load(), tc.qp.rq.tail.Load())
	}
	tc.put(t, 4, func(e []byte) {
		cset(t, e, cqe, "srqn_uidx", tQPUidx)
		cset(t, e, cqe, "wqe_counter", 3)
		cset(t, e, cqe, "op_own", cqeReq<<4)
	})
	if n, _ := tc.cq.Poll(wc[:]); n != 1 || wc[0].ID != 0x5003 || tc.qp.sq.tail.Load() != 4 {
		t.Errorf("an outstanding WQE: n %d, %+v, tail %d", n, wc[0], tc.qp.sq.tail.Load())
	}
}

// TestCQEVersion0 finds the QP by the QP number in sop_drop_qpn.
func TestCQEVersion0(t *testing.T) {
	tc := newTestCQ(t, 64, 0, 3)
	tc.put(t, 0, func(e []byte) {
		cset(t, e, cqe, "sop_drop_qpn", uint64(opSend)<<24|tQPN)
		cset(t, e, cqe, "srqn_uidx", 0)
		cset(t, e, cqe, "wqe_counter", 4)
		cset(t, e, cqe, "op_own", cqeReq<<4)
	})
	var wc [1]provider.WorkCompletion
	if n, err := tc.cq.Poll(wc[:]); n != 1 || err != nil || wc[0].ID != 0x5004 {
		t.Fatalf("Poll = %d, %v, %+v", n, err, wc[0])
	}
}

// TestStrayCQE skips a CQE that names no live QP, and reports an unknown
// opcode as an error after consuming it.
func TestStrayCQE(t *testing.T) {
	tc := newTestCQ(t, 64, 1, 3)
	tc.put(t, 0, func(e []byte) {
		cset(t, e, cqe, "srqn_uidx", 77)
		cset(t, e, cqe, "op_own", cqeReq<<4)
	})
	tc.put(t, 1, func(e []byte) {
		cset(t, e, cqe, "srqn_uidx", tQPUidx)
		cset(t, e, cqe, "op_own", 9<<4)
	})
	var wc [4]provider.WorkCompletion
	n, err := tc.cq.Poll(wc[:])
	if n != 0 || err == nil {
		t.Fatalf("Poll = %d, %v; want 0 and an error", n, err)
	}
	if tc.cq.stray != 1 || tc.cq.ci != 2 {
		t.Errorf("stray %d, ci %d; want 1, 2", tc.cq.stray, tc.cq.ci)
	}
}

// TestSetRingRefusesShortRing: cqeAt reads the ring with no bounds check,
// so setRing must refuse a ring shorter than its entries need.
func TestSetRingRefusesShortRing(t *testing.T) {
	q := &cq{cqeSize: 128}
	q.setRing(make([]byte, 4*128), 2) // exactly long enough
	if q.mask != 3 || q.shift != 7 || q.tail != 64 {
		t.Fatalf("setRing(4 x 128 B): mask %d shift %d tail %d, want 3 7 64", q.mask, q.shift, q.tail)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("setRing accepted a ring of 4 x 128 B minus one byte for 4 entries")
		}
	}()
	q.setRing(make([]byte, 4*128-1), 2)
}
