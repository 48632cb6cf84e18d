package mlx5

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/provider"
	"golang.org/x/sys/unix"
)

// newRingQP is a QP with real rings and doorbell record but no kernel and
// no doorbell register: enough to see what validation leaves untouched.
func newRingQP(t *testing.T) *qp {
	t.Helper()
	mem, err := mmap.Anonymous(4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	b := mem.Bytes()
	q := &qp{ctx: &context{}, typ: provider.QPTypeRC, mem: mem, qpn: 5, sendRec: word(mem, 2048+4*qpDBSend),
		recvRec: word(mem, 2048+4*qpDBRecv)}
	q.rq = recvQueue{ring: b[:256], cnt: 16, shift: 4, maxSGE: 1, wrid: make([]uint64, 16)}
	q.sq = sendQueue{mem: mem, off: 256, ring: b[256 : 256+8*wqeBB], cnt: 8, slots: make([]sendSlot, 8),
		shape: testShape(provider.QPTypeRC, 1, 16, 1)}
	q.state.Store(uint32(provider.QPStateRTS))
	return q
}

// TestRefusedListTouchesNothing: a list with a bad WR anywhere leaves the
// rings, the counters and the doorbell record exactly as they were, and the
// error names the WR and why.
func TestRefusedListTouchesNothing(t *testing.T) {
	q := newRingQP(t)
	before := append([]byte(nil), q.mem.Bytes()...)
	good := provider.SendWR{ID: 1, Opcode: provider.WRSend, SGL: []provider.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}
	for _, c := range []struct {
		bad  provider.SendWR
		want string
		err  error
	}{
		{provider.SendWR{Opcode: provider.WRSend, SGL: make([]provider.SGE, 2)}, "work request 2 (SEND): invalid argument: 2 SGEs", unix.EINVAL},
		{provider.SendWR{Opcode: provider.WRRDMARead, Flags: provider.SendInline}, "work request 2 (RDMA_READ)", unix.EINVAL},
		{provider.SendWR{Opcode: provider.WRBindMW, Bind: provider.MWBind{Length: 1 << 32}}, "work request 2 (BIND_MW)", provider.ErrNotSupported},
		{provider.SendWR{Opcode: provider.WRLocalInv}, "the WQE needs 128 bytes, the queue was sized for 64", unix.EINVAL},
		{provider.SendWR{Opcode: provider.WRSend, Flags: 1 << 4}, "unknown send flags 0x10", unix.EINVAL},
		{provider.SendWR{Opcode: 10}, "unknown opcode 10", unix.EINVAL},
	} {
		n, err := q.PostSend([]provider.SendWR{good, good, c.bad, good})
		var we *provider.WRError
		if n != 2 || !errors.Is(err, c.err) || !errors.As(err, &we) || we.Index != 2 || we.Provider != "mlx5" ||
			!strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing was posted") {
			t.Errorf("PostSend = %d, %v; want 2 and %q", n, err, c.want)
		}
	}
	// Nine WRs for an eight-WQEBB ring: the ninth is refused, none posted.
	nine := make([]provider.SendWR, 9)
	for i := range nine {
		nine[i] = good
	}
	if n, err := q.PostSend(nine); n != 8 || !errors.Is(err, unix.ENOMEM) {
		t.Errorf("9 WRs on 8 WQEBBs: %d, %v", n, err)
	}
	if n, err := q.PostRecv([]provider.RecvWR{{ID: 1}, {ID: 2, SGL: make([]provider.SGE, 3)}}); n != 1 || !errors.Is(err, unix.EINVAL) {
		t.Errorf("PostRecv = %d, %v", n, err)
	}
	if !bytes.Equal(q.mem.Bytes(), before) || q.sq.head != 0 || q.rq.head != 0 {
		t.Errorf("a refused list changed the queue (send head %d, receive head %d)", q.sq.head, q.rq.head)
	}
	q.Modified(provider.QPStateRTR)
	if _, err := q.PostSend([]provider.SendWR{good}); !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "RTR") {
		t.Errorf("PostSend in RTR: %v", err)
	}
}

// TestGoldenSRQWQE posts to an SRQ and checks its first WQE: the next
// segment keeps the free-list link, the data segments follow.
func TestGoldenSRQWQE(t *testing.T) {
	cnt, shift := srqSize(3, 2)
	mem, err := mmap.Anonymous(int(cnt<<shift) + dbRecSize)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	dbrec := int(cnt << shift)
	s := &srq{ctx: &context{}, mem: mem, ring: mem.Bytes()[:cnt<<shift], shift: shift, cnt: cnt, maxSGE: 2,
		rec:  word(mem, dbrec+4*qpDBRecv),
		wrid: make([]uint64, cnt), tail: cnt - 1, free: cnt - 1}
	for i := uint32(0); i < cnt; i++ {
		be.PutUint16(s.ring[int(i<<shift)+srqNextWqeIndex:], uint16((i+1)&(cnt-1)))
	}
	if _, err := s.PostRecv([]provider.RecvWR{{ID: 7, SGL: []provider.SGE{{Addr: 0x4000, Length: 512, LKey: 9}}}}); err != nil {
		t.Fatal(err)
	}
	w := s.ring[:1<<shift]
	golden(t, "wqe/srq_recv.hex", w)
	for _, k := range []check{
		{0, "mlx5_wqe_srq_next_seg", "next_wqe_index", 1},
		{16, "mlx5_wqe_data_seg", "byte_count", 512}, {16, "mlx5_wqe_data_seg", "lkey", 9}, {16, "mlx5_wqe_data_seg", "addr", 0x4000},
		{32, "mlx5_wqe_data_seg", "lkey", invalidLKey},
	} {
		if got := cfield(t, w, k.at, k.s, k.m); got != k.v {
			t.Errorf("%s.%s at %d = %#x, want %#x", k.s, k.m, k.at, got, k.v)
		}
	}
	if got := be.Uint32(mem.Bytes()[dbrec:]); got != 1 {
		t.Errorf("SRQ doorbell record %d, want 1", got)
	}
	if s.head != 1 || s.free != cnt-2 {
		t.Errorf("head %d, free %d", s.head, s.free)
	}
	// Completing it links it after the tail.
	if id := s.retire(0); id != 7 || s.tail != 0 || be.Uint16(s.ring[int((cnt-1)<<shift)+srqNextWqeIndex:]) != 0 {
		t.Errorf("retire: id %d, tail %d", id, s.tail)
	}
}

// TestResizeWithoutResizeCQE: the kernel switched the device to the new
// ring but the old one holds no RESIZE CQE after its unpolled CQEs. The CQ
// must still move to the new ring (with those CQEs), as rdma-core does,
// and report the anomaly, rather than keep polling a ring the device no
// longer writes.
func TestResizeWithoutResizeCQE(t *testing.T) {
	old, err := mmap.Anonymous(4*64 + dbRecSize)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	q := &cq{ctx: &context{}, dbMem: old, mem: old, cqeSize: 64, dbrec: 4 * 64,
		ciRec: word(old, 4*64+4*cqDBSetCI)}
	q.setRing(old.Bytes()[:4*64], 2)
	initCQEs(q.buf, 64)
	for i := 0; i < 2; i++ { // two CQEs of the first pass (owner bit 0), no RESIZE CQE
		q.buf[i*64+cqeOpOwn] = cqeReq << 4
		be.PutUint16(q.buf[i*64+cqeWqeCounter:], uint16(i))
	}
	nr, err := mmap.Anonymous(8 * 64)
	if err != nil {
		t.Fatal(err)
	}
	initCQEs(nr.Bytes(), 64)
	s := &cqResize{q: q, mem: nr, log: 3}
	if _, err := s.Complete(7); err == nil || !strings.Contains(err.Error(), "no RESIZE CQE") {
		t.Errorf("Complete = %v; want the missing RESIZE CQE reported", err)
	}
	if q.mem != nr || q.log != 3 || q.ci != 1 {
		t.Fatalf("the CQ stayed on the old ring (log %d, ci %d)", q.log, q.ci)
	}
	for i := 0; i < 2; i++ {
		e := nr.Bytes()[(i+1)*64:]
		if e[cqeOpOwn]>>4 != cqeReq || be.Uint16(e[cqeWqeCounter:]) != uint16(i) {
			t.Errorf("CQE %d not moved to the new ring: % x", i, e[56:64])
		}
	}
	// A kernel that made another size than the new ring: Poll refuses.
	s2 := &cqResize{q: q, log: 4}
	s2.mem, _ = mmap.Anonymous(16 * 64)
	if _, err := s2.Complete(63); err == nil {
		t.Errorf("a size mismatch was accepted")
	}
	if _, err := q.Poll(make([]provider.WorkCompletion, 1)); err == nil || errors.Is(err, provider.ErrClosed) {
		t.Errorf("Poll after a size mismatch: %v; want the mismatch", err)
	}
	q.Close()
}
