// Package conformance is the provider-agnostic verbs suite: the same tests
// run against every provider's fast path through package uverbs (rxe and
// siw on the rig's real kernels, mlx5 on its device model). A provider's
// package wires it up in a test:
//
//	func TestConformance(t *testing.T) {
//		rigtest.Require(t)
//		rigtest.Device(t, "rxe0")
//		dev, _ := uverbs.DeviceByName("rxe0")
//		conformance.Run(t, dev, conformance.Options{GIDIndex: 1, DoorbellsPerPostSend: 1})
//	}
//
// Everything that differs between devices is in Options; the tests
// themselves assume only the verbs semantics (IBTA and libibverbs' man
// pages). The transport is loopback (two QPs of one device talking to each
// other, addressed with a GRH on RoCE), or, with Options.Peer, two devices
// (the rig's rxea and rxeb on a veth pair): then every QP that sends is on
// the first device and every QP that receives on the second.
//
// It imports uverbs and mmap only: it sees a provider through the public API,
// as a program does.
package conformance

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/uverbs"
)

// Options describe the device under test.
type Options struct {
	// Port is the port the QPs use (default 1).
	Port uint8
	// GIDIndex is the source GID index for addressing with a GRH: on RoCE
	// the RoCEv2 GID of the netdev's IPv4 address (rxe0 in the rig: 1).
	GIDIndex uint8
	// GID, if set, is the port's GID at GIDIndex; otherwise the suite asks
	// the device (Context.QueryGID).
	GID *[16]byte
	// Peer, if set, is a second device reachable from the first: every test
	// then runs across the two instead of in loopback. PeerGIDIndex and
	// PeerGID are its GIDIndex and GID.
	Peer         *uverbs.Device
	PeerGIDIndex uint8
	PeerGID      *[16]byte
	// LIDRouted addresses without a GRH (InfiniBand within a subnet); the
	// default is a GRH, which RoCE requires.
	LIDRouted bool
	// MTU is the path MTU (default 1024).
	MTU uverbs.MTU
	// DoorbellsPerPostSend is the number of syscalls one PostSend call
	// makes, whatever the list's length: rxe 1 (its write() doorbell),
	// mlx5 0 (an MMIO store).
	DoorbellsPerPostSend int
	// OpenOptions are passed to uverbs.OpenWith.
	OpenOptions uverbs.OpenOptions
	// Timeout bounds every wait for a completion (default 30 s: the rig
	// runs under TCG, where rxe is slow).
	Timeout time.Duration
	// NothingLostWRs is the number of work requests the NothingLost test
	// posts in all (default 20,000).
	NothingLostWRs int
	// MWType1ByPostSend says the device binds type 1 memory windows with a
	// BIND_MW work request, as rxe does (its kernel driver checks a type 1
	// window's state, not how the bind was posted; librxe turns
	// ibv_bind_mw into such a request). Without it MWBindType1 skips.
	MWType1ByPostSend bool
	// MWChecksMRRangeOnly says the device checks an RDMA access through a
	// memory window against the range of the window's MR, not the
	// window's own: rxe does (rxe_resp.c, check_rkey: after
	// rxe_lookup_mw, mr_check_range(mw->mr, va + offset, resid)). MWBind
	// then tests the MR's bounds instead of the window's.
	MWChecksMRRangeOnly bool
	// Skip names tests not to run, with the reason as value.
	Skip map[string]string
	// Connect, if set, connects two RC QPs in RESET, a the active side
	// and b the passive one, through the device's connection manager:
	// iWARP QPs reach RTS only through rdma_cm (the suite imports no CM;
	// the provider's test brings it). The hook registers its own
	// cleanups. Nil: the suite moves the QPs to RTS itself
	// (uverbs.QP.Connect).
	Connect func(t *testing.T, a, b *uverbs.QP)
	// IWARP applies the iWARP transport's rules (siw): RC only (no UD, no
	// UC), no atomics, no immediate data, no memory windows, no
	// LOCAL_INV, no RNR (a SEND without a receive breaks the connection),
	// an RDMA WRITE's remote error is not reported to the writer, and a
	// QP in ERR takes no new requests and is never reset (siw flushes
	// only on entering ERR). The tests of what iWARP lacks check that the
	// device refuses it; the others adapt to the rules.
	IWARP bool
	// HoldDevice, if set, stops an in-process device model's hardware side
	// until the function it returns is called: the tests that count the
	// fast path's allocations (testing.AllocsPerRun counts the whole
	// process's) hold it while they count, so that the model's own work
	// (it allocates as it executes requests) is not the verbs'. Nil for a
	// device in the kernel.
	HoldDevice func() (release func())
}

func (o *Options) defaults() {
	if o.Port == 0 {
		o.Port = 1
	}
	if o.MTU == 0 {
		o.MTU = uverbs.MTU1024
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	if o.NothingLostWRs == 0 {
		o.NothingLostWRs = 20000
	}
}

// tests is the suite, in the order it runs.
var tests = []struct {
	name string
	f    func(t *testing.T, e *env)
}{
	{"SendRecv", testSendRecv},
	{"SendWithImm", testSendWithImm},
	{"RDMAWrite", testRDMAWrite},
	{"RDMAWriteWithImm", testWriteWithImm},
	{"RDMARead", testRDMARead},
	{"AtomicCmpAndSwp", testAtomicCmpSwp},
	{"AtomicFetchAndAdd", testAtomicFetchAdd},
	{"Inline", testInline},
	{"MultiSGE", testMultiSGE},
	{"Unsignaled", testUnsignaled},
	{"SignalAll", testSignalAll},
	{"Fence", testFence},
	{"OneDoorbell", testOneDoorbell},
	{"LongList", testLongList},
	{"WRBatch", testWRBatch},
	{"WRBatchUD", testWRBatchUD},
	{"AHFromWC", testAHFromWC},
	{"SRQ", testSRQ},
	{"XRC", testXRC},
	{"XRCMemoryWindows", testXRCMemoryWindows},
	{"UD", testUD},
	{"UC", testUC},
	{"RemoteAccessError", testRemoteAccessError},
	{"MWBind", testMWBind},
	{"MWBindType1", testMWBindType1},
	{"LocalInv", testLocalInv},
	{"SendWithInv", testSendWithInv},
	{"RNRRetryExceeded", testRNR},
	{"FlushOnError", testFlush},
	{"RefusedListLeavesQueue", testRefusedList},
	{"ResetAndReuse", testResetReuse},
	{"ConcurrentPosters", testConcurrentPosters},
	{"ResizeCQ", testResizeCQ},
	{"Events", testEvents},
	{"SolicitedEvents", testSolicited},
	{"CQWait", testCQWait},
	{"CQPoll", testCQPoll},
	{"CQTimestamps", testCQTimestamps},
	{"FastPathAllocs", testAllocs},
	{"NothingLost", testNothingLost},
}

// Run runs the suite on dev (and o.Peer).
func Run(t *testing.T, dev uverbs.Device, o Options) {
	o.defaults()
	e := &env{o: o}
	e.a = newSide(t, dev, o.OpenOptions, o.Port, o.GIDIndex, o.GID, o.LIDRouted)
	e.b = e.a
	mode := "loopback"
	if o.Peer != nil {
		e.b = newSide(t, *o.Peer, o.OpenOptions, o.Port, o.PeerGIDIndex, o.PeerGID, o.LIDRouted)
		mode = "to " + o.Peer.Name
	}
	t.Logf("conformance on %s (%v) %s, GOMAXPROCS=%d GODEBUG=%q", dev.Name, dev.Driver, mode, runtime.GOMAXPROCS(0), os.Getenv("GODEBUG"))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if why, ok := o.Skip[tc.name]; ok {
				t.Skipf("skipped by the provider's options: %s", why)
			}
			tc.f(t, e)
		})
	}
}

// env is what every test shares: the sending side and the receiving side
// (one and the same in loopback).
type env struct {
	o    Options
	a, b *side
}

// side is an open device: a context, a PD and the GID its QPs use.
type side struct {
	dev      uverbs.Device
	ctx      *uverbs.Context
	pd       *uverbs.PD
	gid      [16]byte
	gidIndex uint8
	lid      uint16 // the port's LID, for LID-routed addresses
}

func newSide(t *testing.T, dev uverbs.Device, oo uverbs.OpenOptions, port, gidIndex uint8, gid *[16]byte, lid bool) *side {
	t.Helper()
	ctx, err := uverbs.OpenWith(dev, oo)
	if err != nil {
		t.Fatalf("Open(%s): %v", dev.Name, err)
	}
	t.Cleanup(func() { ctx.Close() })
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatalf("AllocPD on %s: %v", dev.Name, err)
	}
	t.Cleanup(func() { pd.Close() })
	s := &side{dev: dev, ctx: ctx, pd: pd, gidIndex: gidIndex}
	switch {
	case lid:
		pa, err := ctx.QueryPort(int(port))
		if err != nil {
			t.Fatalf("QueryPort(%d) of %s: %v", port, dev.Name, err)
		}
		if pa.LID == 0 {
			t.Fatalf("%s port %d has no LID: it cannot be LID-routed", dev.Name, port)
		}
		s.lid = pa.LID
	case gid != nil:
		s.gid = *gid
	default:
		ent, err := ctx.QueryGID(int(port), int(gidIndex))
		if err != nil {
			t.Fatalf("GID %d of %s port %d: %v", gidIndex, dev.Name, port, err)
		}
		s.gid = ent.GID
		t.Logf("%s port %d GID %d: %x (%v)", dev.Name, port, gidIndex, ent.GID, ent.Type)
	}
	return s
}

// buffer is registered memory off the Go heap.
type buffer struct {
	r  *mmap.Region
	mr *uverbs.MR
}

const allAccess = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic

func (s *side) buffer(t *testing.T, size int) *buffer {
	t.Helper()
	r, err := mmap.Anonymous(size)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := s.pd.RegMR(r.Bytes(), allAccess)
	if err != nil {
		r.Close()
		t.Fatalf("RegMR: %v", err)
	}
	t.Cleanup(func() {
		mr.Close()
		r.Close()
	})
	return &buffer{r: r, mr: mr}
}

func (b *buffer) bytes() []byte       { return b.r.Bytes() }
func (b *buffer) addr(off int) uint64 { return uint64(b.r.Addr()) + uint64(off) }
func (b *buffer) sge(off, n int) uverbs.SGE {
	return uverbs.SGE{Addr: b.addr(off), Length: uint32(n), LKey: b.mr.LKey()}
}

// end is one QP with its CQ (sends and receives) and a registered buffer.
type end struct {
	side *side
	qp   *uverbs.QP
	cq   *uverbs.CQ
	buf  *buffer
}

// qpConfig is how a test wants its QPs.
type qpConfig struct {
	typ         uverbs.QPType
	cap         uverbs.QPCap
	signalAll   bool
	cqe         int
	channel     *uverbs.CompChannel
	srq         *uverbs.SRQ
	rnrRetry    uint8 // default 7 (infinite)
	minRNRTimer uint8 // default 1 (0.01 ms)
	noRetryRNR  bool  // use rnrRetry 0
	access      uverbs.Access
	timestamps  bool // the CQ stamps completions (CQOptions.Timestamps)
}

func (c *qpConfig) defaults() {
	if c.typ == 0 {
		c.typ = uverbs.QPTypeRC
	}
	if c.cap == (uverbs.QPCap{}) {
		c.cap = uverbs.QPCap{MaxSendWR: 32, MaxRecvWR: 32, MaxSendSGE: 1, MaxRecvSGE: 1}
	}
	if c.srq != nil {
		c.cap.MaxRecvWR, c.cap.MaxRecvSGE = 0, 0
	}
	if c.cqe == 0 {
		c.cqe = int(2*(c.cap.MaxSendWR+c.cap.MaxRecvWR)) + 16
	}
	if c.rnrRetry == 0 && !c.noRetryRNR {
		c.rnrRetry = 7
	}
	if c.minRNRTimer == 0 {
		c.minRNRTimer = 1
	}
	if c.access == 0 {
		c.access = allAccess &^ uverbs.AccessLocalWrite
		if c.typ == uverbs.QPTypeUC {
			c.access = uverbs.AccessRemoteWrite
		}
	}
}

// newEnd creates a QP (in RESET) on side s, with its own CQ and a 64 KiB
// buffer.
func (e *env) newEnd(t *testing.T, s *side, c qpConfig) *end {
	t.Helper()
	c.defaults()
	cq, err := s.ctx.CreateCQ(c.cqe, uverbs.CQOptions{Channel: c.channel, Timestamps: c.timestamps})
	if err != nil {
		t.Fatalf("CreateCQ: %v", err)
	}
	t.Cleanup(func() { cq.Close() })
	qp, err := s.pd.CreateQP(uverbs.QPInit{Type: c.typ, SendCQ: cq, RecvCQ: cq, SRQ: c.srq, Cap: c.cap, SignalAll: c.signalAll})
	if err != nil {
		t.Fatalf("CreateQP(%v, %+v): %v", c.typ, c.cap, err)
	}
	t.Cleanup(func() { qp.Close() })
	return &end{side: s, qp: qp, cq: cq, buf: s.buffer(t, 64<<10)}
}

// pair creates two connected QPs (RC or UC): a sends, b receives.
func (e *env) pair(t *testing.T, c qpConfig) (a, b *end) {
	t.Helper()
	a, b = e.newEnd(t, e.a, c), e.newEnd(t, e.b, c)
	e.link(t, a, b, c)
	return a, b
}

// link connects a (the active side) and b, both in RESET: through
// Options.Connect if set, else with MODIFY_QP on both.
func (e *env) link(t *testing.T, a, b *end, c qpConfig) {
	t.Helper()
	if e.o.Connect != nil && (c.typ == 0 || c.typ == uverbs.QPTypeRC) {
		e.o.Connect(t, a.qp, b.qp)
		return
	}
	e.connect(t, a, b, c)
	e.connect(t, b, a, c)
}

// refused checks that PostSend refuses wr as something the device cannot
// carry: nothing posted, an error matching uverbs.ErrNotSupported.
func refused(t *testing.T, qp *uverbs.QP, wr uverbs.SendWR) {
	t.Helper()
	n, err := qp.PostSend([]uverbs.SendWR{wr})
	if n != 0 || !errors.Is(err, uverbs.ErrNotSupported) {
		t.Errorf("PostSend(%v) = %d, %v; want 0 and an error matching ErrNotSupported", wr.Opcode, n, err)
		return
	}
	t.Logf("refused as the transport has no %v: %v", wr.Opcode, err)
}

// endpoint is side s's endpoint for QP qpn: its port, GID (or LID) and
// startPSN.
func (e *env) endpoint(s *side, qpn uint32) uverbs.Endpoint {
	ep := uverbs.Endpoint{QPN: qpn, PSN: startPSN, Port: int(e.o.Port), GIDIndex: int(s.gidIndex), LID: s.lid}
	if !e.o.LIDRouted {
		ep.GID = s.gid
	}
	return ep
}

// av is the address of side to, as seen from side from.
func (e *env) av(from, to *side) uverbs.AHAttr {
	return e.endpoint(from, 0).PathTo(e.endpoint(to, 0), uverbs.ConnectOptions{})
}

const startPSN = 0x100

// connect takes from's RC or UC QP through INIT, RTR and RTS to to's QP
// (uverbs.QP.Connect).
func (e *env) connect(t *testing.T, from, to *end, c qpConfig) {
	t.Helper()
	c.defaults()
	o := uverbs.ConnectOptions{Access: c.access, MTU: e.o.MTU, MaxDestRDAtomic: 4, MaxRDAtomic: 4,
		MinRNRTimer: int(c.minRNRTimer), RNRRetry: int(c.rnrRetry)}
	if c.rnrRetry == 0 {
		o.RNRRetry = -1
	}
	if err := from.qp.Connect(e.endpoint(from.side, from.qp.QPN()), e.endpoint(to.side, to.qp.QPN()), o); err != nil {
		t.Fatalf("Connect QP %d: %v", from.qp.QPN(), err)
	}
}

// connectUD takes a UD QP to RTS.
func (e *env) connectUD(t *testing.T, qp *uverbs.QP, qkey uint32) {
	t.Helper()
	if err := qp.Connect(uverbs.Endpoint{QPN: qp.QPN(), PSN: startPSN, Port: int(e.o.Port)}, uverbs.Endpoint{},
		uverbs.ConnectOptions{QKey: qkey}); err != nil {
		t.Fatalf("Connect UD QP %d: %v", qp.QPN(), err)
	}
}

func modify(t *testing.T, qp *uverbs.QP, a *uverbs.QPAttr, mask uverbs.QPAttrMask) {
	t.Helper()
	if err := qp.Modify(a, mask); err != nil {
		t.Fatalf("Modify QP %d to %v: %v", qp.QPN(), a.State, err)
	}
}

func toError(t *testing.T, qp *uverbs.QP) {
	t.Helper()
	modify(t, qp, &uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState)
}

// post posts wrs and fails the test on an error.
func post(t *testing.T, qp *uverbs.QP, wrs ...uverbs.SendWR) {
	t.Helper()
	if n, err := qp.PostSend(wrs); err != nil || n != len(wrs) {
		t.Fatalf("PostSend of %d: %d, %v", len(wrs), n, err)
	}
}

func postRecv(t *testing.T, qp *uverbs.QP, wrs ...uverbs.RecvWR) {
	t.Helper()
	if n, err := qp.PostRecv(wrs); err != nil || n != len(wrs) {
		t.Fatalf("PostRecv of %d: %d, %v", len(wrs), n, err)
	}
}

// wait polls cq until n completions came, or fails at the timeout.
func (e *env) wait(t *testing.T, cq *uverbs.CQ, n int) []uverbs.WorkCompletion {
	t.Helper()
	got := make([]uverbs.WorkCompletion, 0, n)
	wc := make([]uverbs.WorkCompletion, 16)
	deadline := time.Now().Add(e.o.Timeout)
	for len(got) < n {
		k, err := cq.Poll(wc[:min(len(wc), n-len(got))])
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		got = append(got, wc[:k]...)
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d completions after %v: %s", len(got), n, e.o.Timeout, fmtWCs(got))
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	return got
}

// quiet checks that cq stays empty for d.
func quiet(t *testing.T, cq *uverbs.CQ, d time.Duration) {
	t.Helper()
	wc := make([]uverbs.WorkCompletion, 4)
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if n, _ := cq.Poll(wc); n > 0 {
			t.Fatalf("unexpected completions: %s", fmtWCs(wc[:n]))
		}
		time.Sleep(time.Millisecond)
	}
}

func fmtWC(w uverbs.WorkCompletion) string {
	s := fmt.Sprintf("{id %#x %v %v len %d qp %d", w.ID, w.Opcode, w.Status, w.ByteLen, w.QPNum)
	if w.Flags&uverbs.WCWithImm != 0 {
		s += fmt.Sprintf(" imm %#x", w.Imm)
	}
	if w.Flags&uverbs.WCWithInv != 0 {
		s += fmt.Sprintf(" inv %#x", w.Imm)
	}
	if w.VendorErr != 0 {
		s += fmt.Sprintf(" vendor_err %#x", w.VendorErr)
	}
	return s + "}"
}

func fmtWCs(ws []uverbs.WorkCompletion) string {
	var b strings.Builder
	for i, w := range ws {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(fmtWC(w))
	}
	return "[" + b.String() + "]"
}

// expect checks one completion's id, status and opcode.
func expect(t *testing.T, w uverbs.WorkCompletion, id uint64, st uverbs.WCStatus, op uverbs.WCOpcode) {
	t.Helper()
	if w.ID != id || w.Status != st || (st == uverbs.WCSuccess && w.Opcode != op) {
		t.Errorf("completion %s, want id %#x %v %v", fmtWC(w), id, op, st)
	}
}

// byID indexes completions by work request id.
func byID(t *testing.T, ws []uverbs.WorkCompletion) map[uint64]uverbs.WorkCompletion {
	t.Helper()
	m := map[uint64]uverbs.WorkCompletion{}
	for _, w := range ws {
		if _, dup := m[w.ID]; dup {
			t.Errorf("two completions for id %#x: %s", w.ID, fmtWCs(ws))
		}
		m[w.ID] = w
	}
	return m
}

// fill writes a recognisable pattern.
func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}

// allocsPerRun is testing.AllocsPerRun with the device held, if the
// options say how (Options.HoldDevice): only the verbs' own allocations
// count.
func (e *env) allocsPerRun(runs int, f func()) float64 {
	if e.o.HoldDevice != nil {
		release := e.o.HoldDevice()
		defer release()
	}
	return testing.AllocsPerRun(runs, f)
}
