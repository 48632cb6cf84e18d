package rxe

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/provider/internal/fakefile"
	"github.com/goverbs/goverbs/provider/internal/writedoorbell"
	"golang.org/x/sys/unix"
)

// fakeRXE plays the kernel's side of an rxe command file for unit tests:
// it hands out queue mappings (anonymous memory with an rxe_queue_buf
// header) and records doorbell writes. It is no model of rxe's transport:
// what the kernel does with the queues is the rig's business; these tests
// check the bytes the provider writes and the rules it enforces.
type fakeRXE struct {
	fakefile.Regions // the queues, by mmap offset; each mapped once, as on rxe
	t                testing.TB
	mu               sync.Mutex // guards lastDB

	doorbells atomic.Int64
	raw       atomic.Int64 // of which came as raw doorbells (abi.File.Doorbell)
	lastDB    [writedoorbell.CmdSize]byte
	// onDoorbell runs on every POST_SEND write (with the QP handle);
	// it must not allocate (the allocation tests ring doorbells).
	onDoorbell func(handle uint32)
	// dbErr, if set, is every POST_SEND write's error (after onDoorbell).
	dbErr    error
	notifies []uint32
	gids     map[[2]int][16]byte // QueryGID's table: {port, index} -> GID
}

// newFake registers a fake command file and opens it.
func newFake(t testing.TB) (*fakeRXE, *abi.File) {
	t.Helper()
	fk := &fakeRXE{Regions: fakefile.Regions{MapOnce: true}, t: t}
	return fk, fakefile.Open(t, abi.RDMA_DRIVER_RXE, fk)
}

// addQueue creates a queue of slots slots of 2^log2 bytes and returns the
// mmap info the kernel would report for it.
func (fk *fakeRXE) addQueue(slots int, log2 uint32) abi.Mminfo {
	size := queueHdrSize + slots<<log2
	off, mem := fk.Add(fk.t, size)
	ne := binary.NativeEndian
	ne.PutUint32(mem[offLog2:], log2)
	ne.PutUint32(mem[offIndexMask:], uint32(slots-1))
	return abi.Mminfo{Offset: uint64(off), Size: uint32(size)}
}

// queueAt returns the kernel's view of the queue at mi.
func (fk *fakeRXE) queueAt(mi abi.Mminfo) *queue {
	q, err := newQueue(fk.Bytes(int64(mi.Offset))[:mi.Size], "fake", 1)
	if err != nil {
		fk.t.Fatal(err)
	}
	return q
}

func (fk *fakeRXE) Ioctl(fd int, req uint, arg []byte) error { return unix.ENOTTY }

// Doorbell is a write to the fake, counted as raw.
func (fk *fakeRXE) Doorbell(fd int, p []byte) (int, error) {
	fk.raw.Add(1)
	return fk.Write(fd, p)
}

func (fk *fakeRXE) Write(fd int, p []byte) (int, error) {
	if handle, ok := writedoorbell.Parse(p); ok {
		fk.doorbells.Add(1)
		fk.mu.Lock()
		copy(fk.lastDB[:], p)
		fk.mu.Unlock()
		if fk.onDoorbell != nil {
			fk.onDoorbell(handle)
		}
		if fk.dbErr != nil {
			return 0, fk.dbErr
		}
		return len(p), nil
	}
	return 0, unix.EINVAL
}

// fakeOps is the provider.Kernel uverbs would lend.
type fakeOps struct {
	fk *fakeRXE
	f  *abi.File
}

func (o fakeOps) File() *abi.File                              { return o.f }
func (o fakeOps) GetContext(in, out []byte) error              { return nil }
func (o fakeOps) CopyOnFork() bool                             { return false }
func (o fakeOps) ModifyQPState(uint32, provider.QPState) error { return nil }

// QueryGID answers from fk.gids; an entry it lacks is unused (ENODATA).
func (o fakeOps) QueryGID(port, index int) ([16]byte, error) {
	g, ok := o.fk.gids[[2]int{port, index}]
	if !ok {
		return g, unix.ENODATA
	}
	return g, nil
}

func (o fakeOps) ReqNotifyCQ(cq uint32, sol bool) error {
	o.fk.notifies = append(o.fk.notifies, cq)
	return nil
}

// testContext opens a provider context on a fresh fake.
func testContext(t testing.TB) (*fakeRXE, *Context) {
	fk, f := newFake(t)
	pc, err := Driver{}.NewContext(fakeOps{fk, f})
	if err != nil {
		t.Fatal(err)
	}
	return fk, pc.(*Context)
}

// putMI writes mmap info as the kernel would into a udata response.
func putMI(b []byte, mi abi.Mminfo) {
	copy(b, abi.Bytes(&mi))
}

type qpSpec struct {
	typ              provider.QPType
	sqSlots, rqSlots int
	sqLog2, rqLog2   uint32
	cap              provider.QPCap
	srq              bool
	single           bool // provider.QPAttr.SingleThreaded
	handle, qpn      uint32
}

// testQP creates a QP through the two-phase setup against the fake.
func testQP(t testing.TB, fk *fakeRXE, c *Context, s qpSpec) *QP {
	t.Helper()
	if s.typ == 0 {
		s.typ = provider.QPTypeRC
	}
	if s.sqSlots == 0 {
		s.sqSlots, s.sqLog2 = 16, 8
	}
	if s.rqSlots == 0 {
		s.rqSlots, s.rqLog2 = 16, 6
	}
	if s.cap == (provider.QPCap{}) {
		s.cap = provider.QPCap{MaxSendWR: 15, MaxRecvWR: 15, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}
	}
	if s.handle == 0 {
		s.handle = 7
	}
	attr := provider.QPAttr{Type: s.typ, Cap: s.cap, SingleThreaded: s.single}
	if s.srq {
		attr.SRQ = &SRQ{}
	}
	st, err := c.CreateQP(attr)
	if err != nil {
		t.Fatal(err)
	}
	in, out := st.Udata()
	if len(in) != 0 || len(out) != 32 {
		t.Fatalf("QP udata: in %d bytes, out %d bytes; want 0 and 32", len(in), len(out))
	}
	sqMI := fk.addQueue(s.sqSlots, s.sqLog2)
	putMI(out[16:], sqMI)
	if !s.srq {
		putMI(out[0:], fk.addQueue(s.rqSlots, s.rqLog2))
	}
	pq, err := st.Complete(provider.QPCreated{Handle: s.handle, QPN: s.qpn, Cap: s.cap})
	if err != nil {
		t.Fatal(err)
	}
	qp := pq.(*QP)
	qp.Modified(provider.QPStateRTS)
	t.Cleanup(func() { qp.Close() })
	return qp
}

// testCQ creates a CQ with slots slots of 2^log2 bytes.
func testCQ(t testing.TB, fk *fakeRXE, c *Context, slots int, log2 uint32) (*CQ, *queue) {
	t.Helper()
	return testCQAttr(t, fk, c, slots, log2, provider.CQAttr{})
}

// testCQAttr is testCQ with a (CQE is set from slots).
func testCQAttr(t testing.TB, fk *fakeRXE, c *Context, slots int, log2 uint32, a provider.CQAttr) (*CQ, *queue) {
	t.Helper()
	a.CQE = slots - 1
	st, err := c.CreateCQ(a)
	if err != nil {
		t.Fatal(err)
	}
	in, out := st.Udata()
	if len(in) != 0 || len(out) != 16 {
		t.Fatalf("CQ udata: in %d bytes, out %d bytes; want 0 and 16", len(in), len(out))
	}
	mi := fk.addQueue(slots, log2)
	putMI(out, mi)
	pcq, err := st.Complete(provider.CQCreated{Handle: 3, CQE: uint32(slots - 1)})
	if err != nil {
		t.Fatal(err)
	}
	cq := pcq.(*CQ)
	t.Cleanup(func() { cq.Close() })
	return cq, fk.queueAt(mi)
}
