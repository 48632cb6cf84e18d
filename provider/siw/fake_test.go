package siw

import (
	"encoding/binary"
	"sync/atomic"
	"testing"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/provider/internal/fakefile"
	"github.com/goverbs/goverbs/provider/internal/writedoorbell"
	"golang.org/x/sys/unix"
)

// fakeSIW plays the kernel's side of a siw command file for unit tests: it
// hands out ring mappings (anonymous memory) by key and records doorbell
// writes. What the kernel does with the rings is the rig's business; these
// tests check the bytes the provider writes and the rules it enforces.
type fakeSIW struct {
	fakefile.Regions // the rings, by key
	t                testing.TB

	doorbells atomic.Int64
	raw       atomic.Int64 // of which came as raw doorbells (abi.File.Doorbell)
	// dbErr, if set, is the doorbell's error (ENOTCONN: not in RTS).
	dbErr error
	// onDoorbell runs on every POST_SEND write; it must not allocate.
	onDoorbell func(handle uint32)
}

func newFake(t testing.TB) (*fakeSIW, *abi.File) {
	t.Helper()
	fk := &fakeSIW{t: t}
	return fk, fakefile.Open(t, abi.RDMA_DRIVER_SIW, fk)
}

// addRing allocates size bytes and returns their key.
func (fk *fakeSIW) addRing(size int) uint64 {
	off, _ := fk.Add(fk.t, size)
	return uint64(off)
}

// ringAt is the kernel's view of the ring at key.
func (fk *fakeSIW) ringAt(key uint64, n uint32, elem, extra int) *ring {
	r, err := newRing(fk.Bytes(int64(key)), "fake", n, elem, extra)
	if err != nil {
		fk.t.Fatal(err)
	}
	return r
}

func (fk *fakeSIW) Ioctl(fd int, req uint, arg []byte) error { return unix.ENOTTY }

// Doorbell is a write to the fake, counted as raw.
func (fk *fakeSIW) Doorbell(fd int, p []byte) (int, error) {
	fk.raw.Add(1)
	return fk.Write(fd, p)
}

func (fk *fakeSIW) Write(fd int, p []byte) (int, error) {
	handle, ok := writedoorbell.Parse(p)
	if !ok {
		return 0, unix.EINVAL
	}
	fk.doorbells.Add(1)
	if fk.onDoorbell != nil {
		fk.onDoorbell(handle)
	}
	if fk.dbErr != nil {
		return 0, fk.dbErr
	}
	return len(p), nil
}

type fakeOps struct {
	fk *fakeSIW
	f  *abi.File
}

func (o fakeOps) File() *abi.File                              { return o.f }
func (o fakeOps) GetContext(in, out []byte) error              { return nil }
func (o fakeOps) CopyOnFork() bool                             { return false }
func (o fakeOps) ModifyQPState(uint32, provider.QPState) error { return nil }
func (o fakeOps) ReqNotifyCQ(uint32, bool) error               { return unix.ENOSYS }

func testContext(t testing.TB) (*fakeSIW, *Context) {
	fk, f := newFake(t)
	pc, err := Driver{}.NewContext(fakeOps{fk, f})
	if err != nil {
		t.Fatal(err)
	}
	return fk, pc.(*Context)
}

// testQP creates an RC QP of nsq send and nrq receive entries (no receive
// ring with srq) in RTS; it returns the kernel's views of the rings.
func testQP(t testing.TB, fk *fakeSIW, c *Context, nsq, nrq uint32, srq bool, sigAll bool) (*QP, *ring, *ring) {
	t.Helper()
	attr := provider.QPAttr{Type: provider.QPTypeRC, SignalAll: sigAll}
	if srq {
		attr.SRQ = &SRQ{}
	}
	return testQPAttr(t, fk, c, nsq, nrq, attr)
}

// testQPAttr is testQP with the attributes a (an RC QP on an SRQ if a.SRQ
// is set).
func testQPAttr(t testing.TB, fk *fakeSIW, c *Context, nsq, nrq uint32, attr provider.QPAttr) (*QP, *ring, *ring) {
	t.Helper()
	srq := attr.SRQ != nil
	st, err := c.CreateQP(attr)
	if err != nil {
		t.Fatal(err)
	}
	in, out := st.Udata()
	if len(in) != 0 || len(out) != 32 {
		t.Fatalf("QP udata: in %d, out %d bytes; want 0 and 32", len(in), len(out))
	}
	resp := abi.SiwUrespCreateQp{QpId: 9, NumSqe: nsq, NumRqe: nrq, SqKey: fk.addRing(int(nsq) * sqeSize)}
	if !srq {
		resp.RqKey = fk.addRing(int(nrq) * rqeSize)
	}
	copy(out, abi.Bytes(&resp))
	cp := provider.QPCap{MaxSendWR: nsq, MaxRecvWR: nrq, MaxSendSGE: 6, MaxRecvSGE: 6, MaxInlineData: 80}
	pq, err := st.Complete(provider.QPCreated{Handle: 7, QPN: 9, Cap: cp})
	if err != nil {
		t.Fatal(err)
	}
	qp := pq.(*QP)
	qp.Modified(provider.QPStateInit) // as rdma_cm leaves it on iWARP
	t.Cleanup(func() { qp.Close() })
	var rq *ring
	if !srq {
		rq = fk.ringAt(resp.RqKey, nrq, rqeSize, 0)
	}
	return qp, fk.ringAt(resp.SqKey, nsq, sqeSize, 0), rq
}

func testCQ(t testing.TB, fk *fakeSIW, c *Context, n uint32) (*CQ, *ring) {
	t.Helper()
	return testCQAttr(t, fk, c, n, provider.CQAttr{})
}

// testCQAttr is testCQ with the attributes a (CQE is set from n).
func testCQAttr(t testing.TB, fk *fakeSIW, c *Context, n uint32, a provider.CQAttr) (*CQ, *ring) {
	t.Helper()
	a.CQE = int(n)
	st, err := c.CreateCQ(a)
	if err != nil {
		t.Fatal(err)
	}
	_, out := st.Udata()
	if len(out) != 16 {
		t.Fatalf("CQ udata out %d bytes, want 16", len(out))
	}
	resp := abi.SiwUrespCreateCq{CqId: 5, NumCqe: n, CqKey: fk.addRing(int(n)*cqeSize + ctrlSize)}
	copy(out, abi.Bytes(&resp))
	pcq, err := st.Complete(provider.CQCreated{Handle: 3, CQE: n})
	if err != nil {
		t.Fatal(err)
	}
	cq := pcq.(*CQ)
	t.Cleanup(func() { cq.Close() })
	return cq, fk.ringAt(resp.CqKey, n, cqeSize, ctrlSize)
}

// kernelTake plays siw_activate_tx on the kernel's view: it takes every
// valid send entry from *get on, clearing its flags.
func kernelTake(sq *ring, get *uint32) int {
	n := 0
	for sq.word(*get, offFlags).Load()&wqeValid != 0 {
		sq.word(*get, offFlags).Store(0)
		*get++
		n++
	}
	return n
}

// kernelComplete writes a CQE as siw_sqe_complete does.
func kernelComplete(cq *ring, put uint32, id uint64, op uint8, status uint16, bytes uint32, qpID uint64) {
	e := cq.cqe(put)
	e.Id = id
	e.Bytes = bytes
	e.SetQpId(qpID)
	var b [4]byte
	b[0], b[1] = abi.SIW_WQE_VALID, op
	binary.NativeEndian.PutUint16(b[2:], status)
	cq.word(put, offCqFlags).Store(binary.NativeEndian.Uint32(b[:]))
}

// userBuf copies data into fresh anonymous memory and returns its address
// (for inline sends, whose SGEs the provider reads).
func userBuf(t testing.TB, data []byte) uint64 {
	t.Helper()
	r, err := mmap.Anonymous(max(len(data), 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	copy(r.Bytes(), data)
	return uint64(r.Addr())
}
