package mlx5

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/doorbell"
	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/provider"
)

// maxCQE bounds a CQ (the kernel checks the device's log_max_cq_sz; 2^22
// is what ConnectX devices report).
const maxCQE = 1<<22 - 1

// cq is a completion queue: a ring of CQEs and a doorbell record in user
// memory the kernel pinned, polled without a syscall.
type cq struct {
	ctx     *context
	dbMem   *mmap.Region // holds the doorbell record (after the first ring)
	mem     *mmap.Region // the current ring (the first one: dbMem)
	buf     []byte
	cqeSize int    // 64 or 128; the 64-byte CQE is the last 64 bytes of a slot
	log     uint32 // log2 of the number of entries
	// The ring's shape for cqeAt, set with buf and log by setRing: the
	// index mask (1<<log - 1), log2 of cqeSize, and the 64-byte CQE's
	// offset in its slot (cqeSize - 64).
	mask   uint32
	shift  uint32
	tail   uintptr
	dbrec  int     // offset of the doorbell record in mem
	ciRec  *uint32 // the consumer index's word of the doorbell record, in dbMem
	cqn    uint32
	stamps bool // created with CQAttr.Timestamps (PollTimestamps)
	// single: created with CQAttr.SingleThreaded. Poll then takes no lock:
	// the program orders it with every other call that touches ci and the
	// ring (Arm, Resize, Close, the QPs' clean). Event, from any goroutine,
	// touches only armSN, under mu.
	single bool

	mu sync.Mutex
	// halt says why Poll cannot run (cqClosed, cqLost, cqDead bits); 0
	// while it can. Atomic: DeviceLost sets cqLost while a single-threaded
	// Poll, which takes no lock, may read it.
	halt  atomic.Uint32
	dead  error  // with cqDead: a resize left no ring to read, Poll returns this
	ci    uint32 // consumer index, free running
	armSN uint32 // arm sequence number: events consumed
	stray uint64 // CQEs that named no live QP or SRQ (skipped)
}

// The bits of cq.halt: one test of the field is Poll's whole check.
const (
	cqClosed uint32 = 1 << iota // Close ran: the ring is unmapped, nothing may read it
	cqLost                      // the device is gone (context.DeviceLost)
	cqDead                      // a resize left no ring to read (cq.dead says why)
)

// cqSetup is a CREATE_CQ in progress.
type cqSetup struct {
	cq  *cq
	in  abi.Mlx5IbCreateCq
	out abi.Mlx5IbCreateCqResp
	ib  []byte
	ob  []byte
}

// CreateCQ allocates the CQE ring for at least a.CQE completions (the
// kernel makes it pow2(CQE+1) entries, and so does this) and its doorbell
// record, and prepares the create command's driver data.
func (c *context) CreateCQ(a provider.CQAttr) (provider.Setup[provider.CQCreated, provider.CQ], error) {
	if a.CQE < 1 || a.CQE > maxCQE {
		return nil, fmt.Errorf("mlx5: CreateCQ: %w", invalid("%d entries: a CQ holds 1 to %d", a.CQE, maxCQE))
	}
	log := uint32(bits.Len32(uint32(a.CQE))) // pow2(CQE+1) = 1<<log
	n := 1 << log
	bufLen := n * c.cqeSize
	mem, err := mmap.AnonymousOpts(bufLen+dbRecSize, mmap.Options{CopyOnFork: c.copyOnFork})
	if err != nil {
		return nil, fmt.Errorf("mlx5: CreateCQ: %w", err)
	}
	q := &cq{ctx: c, dbMem: mem, mem: mem, cqeSize: c.cqeSize, dbrec: bufLen,
		stamps: a.Timestamps, single: a.SingleThreaded}
	q.setRing(mem.Bytes()[:bufLen], log)
	q.ciRec = word(mem, bufLen+4*cqDBSetCI)
	initCQEs(q.buf, c.cqeSize)
	s := &cqSetup{cq: q}
	s.in.BufAddr = uint64(mem.Addr())
	s.in.DbAddr = uint64(mem.Addr()) + uint64(q.dbrec)
	s.in.CqeSize = uint32(c.cqeSize)
	c.mu.Lock()
	if c.dynamic {
		s.in.Flags |= abi.MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX
		s.in.UarPageIndex = uint16(c.cqPage.id)
	}
	c.mu.Unlock()
	s.ib = append([]byte(nil), abi.Bytes(&s.in)...)
	s.ob = make([]byte, len(abi.Bytes(&s.out)))
	return s, nil
}

func (s *cqSetup) Udata() (in, out []byte) { return s.ib, s.ob }

// initCQEs marks every CQE of a new ring INVALID, so that none looks new
// before the device writes it.
func initCQEs(buf []byte, size int) {
	for i := 0; i+size <= len(buf); i += size {
		buf[i+size-cqe64Size+cqeOpOwn] = cqeInvalid << 4
	}
}

func (s *cqSetup) Complete(c provider.CQCreated) (provider.CQ, error) {
	copy(abi.Bytes(&s.out), s.ob)
	q := s.cq
	if c.CQE+1 != 1<<q.log {
		q.mem.Close()
		return nil, fmt.Errorf("mlx5: CreateCQ: the kernel made %d entries, the ring has %d", c.CQE+1, 1<<q.log)
	}
	q.cqn = s.out.Cqn
	if err := q.ctx.track(q); err != nil {
		q.mem.Close()
		return nil, fmt.Errorf("mlx5: CreateCQ: %w", err)
	}
	if q.ctx.lost.Load() {
		q.lose() // DeviceLost may have listed the live objects before track
	}
	return q, nil
}

func (s *cqSetup) Abort() { s.cq.mem.Close() }

// cqResize is a RESIZE_CQ in progress: the new ring, handed to the kernel.
type cqResize struct {
	q    *cq
	mem  *mmap.Region // nil when the size does not change
	log  uint32
	in   []byte
	same bool
}

// Resize prepares a new ring of pow2(cqe+1) CQEs for RESIZE_CQ. The
// kernel switches the device to it; the device marks the switch with a
// RESIZE CQE in the old ring, and Complete moves the CQEs not yet polled
// to the new ring and retires the old one.
func (q *cq) Resize(cqe int) (provider.Setup[uint32, struct{}], error) {
	if cqe < 1 || cqe > maxCQE {
		return nil, fmt.Errorf("mlx5: ResizeCQ: %w", invalid("%d entries: a CQ holds 1 to %d", cqe, maxCQE))
	}
	log := uint32(bits.Len32(uint32(cqe)))
	s := &cqResize{q: q, log: log}
	req := abi.Mlx5IbResizeCq{CqeSize: uint16(q.cqeSize)}
	q.mu.Lock()
	if q.halt.Load()&cqClosed != 0 {
		q.mu.Unlock()
		return nil, fmt.Errorf("mlx5: ResizeCQ: CQ %d: %w", q.cqn, provider.ErrClosed)
	}
	cur := q.log
	req.BufAddr = uint64(q.mem.Addr())
	q.mu.Unlock()
	if log == cur {
		s.same = true // the kernel does nothing either
	} else {
		mem, err := mmap.AnonymousOpts((1<<log)*q.cqeSize, mmap.Options{CopyOnFork: q.ctx.copyOnFork})
		if err != nil {
			return nil, fmt.Errorf("mlx5: ResizeCQ: %w", err)
		}
		initCQEs(mem.Bytes(), q.cqeSize)
		s.mem = mem
		req.BufAddr = uint64(mem.Addr())
	}
	s.in = append([]byte(nil), abi.Bytes(&req)...)
	return s, nil
}

func (s *cqResize) Udata() (in, out []byte) { return s.in, nil }

func (s *cqResize) Abort() {
	if s.mem != nil {
		s.mem.Close()
	}
}

// Complete moves the CQEs between the consumer index and the RESIZE CQE
// to the new ring, one index further on (the RESIZE CQE's index is
// consumed), with the new ring's owner bits, and makes the new ring current.
func (s *cqResize) Complete(got uint32) (struct{}, error) {
	if s.same {
		return struct{}{}, nil
	}
	q := s.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.halt.Load()&cqClosed != 0 {
		s.mem.Close()
		return struct{}{}, fmt.Errorf("mlx5: ResizeCQ: CQ %d: %w", q.cqn, provider.ErrClosed)
	}
	if got+1 != 1<<s.log {
		// The device writes a ring of another size than the one handed
		// over: nothing can be read from it safely. Poll says so.
		q.dead = fmt.Errorf("mlx5: CQ %d: the kernel resized it to %d entries, the new ring has %d; close it", q.cqn, got+1, 1<<s.log)
		q.halt.Or(cqDead)
		if q.mem != q.dbMem {
			q.mem.Close()
		}
		q.mem = s.mem // released by Close
		q.setRing(s.mem.Bytes(), s.log)
		return struct{}{}, q.dead
	}
	// The kernel switched the device to the new ring: switch with it
	// whatever the old one holds (as rdma-core does), so that the CQ keeps
	// working even if the RESIZE CQE is not where it should be.
	var err error
	oldMask, newMask := uint32(1)<<q.log-1, uint32(1)<<s.log-1
	nb := s.mem.Bytes()
	i := q.ci
	for {
		off := int(i&oldMask) * q.cqeSize
		slot := q.buf[off : off+q.cqeSize]
		op := slot[q.cqeSize-cqe64Size+cqeOpOwn]
		if op>>4 == cqeInvalid || uint32(op&cqeOwnerMask) != (i>>q.log)&1 || i-q.ci > oldMask {
			err = fmt.Errorf("mlx5: ResizeCQ: CQ %d: no RESIZE CQE after the %d unpolled CQEs (moved to the new ring; completions may be lost)", q.cqn, i-q.ci)
			break
		}
		if op>>4 == cqeResize {
			break
		}
		doorbell.FromDevice()
		doff := int((i+1)&newMask) * q.cqeSize
		d := nb[doff : doff+q.cqeSize]
		copy(d, slot)
		d[q.cqeSize-cqe64Size+cqeOpOwn] = op&^cqeOwnerMask | byte((i+1)>>s.log)&cqeOwnerMask
		i++
	}
	q.ci++
	if q.mem != q.dbMem {
		q.mem.Close()
	}
	q.mem = s.mem
	q.setRing(nb, s.log)
	return struct{}{}, err
}

// Close releases the ring and the doorbell record, after the kernel CQ is
// destroyed.
func (q *cq) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.halt.Load()&cqClosed != 0 {
		return nil
	}
	q.halt.Or(cqClosed)
	q.ctx.forget(q)
	err := q.mem.Close()
	if q.dbMem != q.mem {
		if e := q.dbMem.Close(); err == nil {
			err = e
		}
	}
	return err
}

// Arm asks for one completion event: the arm word (sequence number, command,
// consumer index) goes to the doorbell record, then with the CQ number in
// one 64-bit store to the CQ doorbell of the context's UAR. No syscall.
func (q *cq) Arm(solicitedOnly bool) error {
	q.mu.Lock()
	if q.halt.Load()&(cqClosed|cqLost) != 0 {
		err := q.stopped()
		q.mu.Unlock()
		return err
	}
	cmd := uint32(0)
	if solicitedOnly {
		cmd = cqArmSol
	}
	v := (q.armSN&3)<<28 | cmd | q.ci&0xffffff
	doorbell.Store32BE(q.dbMem.Pointer(q.dbrec+4*cqDBArm), v)
	doorbell.FlushWC()
	page := q.ctx.cqPage
	doorbell.Store64BE(page.ptr(page.base+cqDoorbellOff), uint64(v)<<32|uint64(q.cqn))
	doorbell.FlushWC()
	q.mu.Unlock()
	return nil
}

// Event advances the arm sequence number after a completion event for this
// CQ was read from its channel.
func (q *cq) Event() {
	q.mu.Lock()
	q.armSN++
	q.mu.Unlock()
}

// Poll reads up to len(wc) new CQEs. A CQE is new when its opcode is not
// INVALID and its owner bit equals the pass bit of the consumer index; its
// other fields are read only after a from-device barrier. The consumer index
// goes to the doorbell record once per call. Poll is poll without
// timestamps, written out: it is the fast path, and this saves it a call.
func (q *cq) Poll(wc []provider.WorkCompletion) (int, error) {
	if !q.single {
		q.mu.Lock()
	}
	if q.halt.Load() != 0 {
		return 0, q.halted()
	}
	n := 0
	var err error
	start := q.ci
	for n < len(wc) {
		c := q.next()
		if c == nil {
			break
		}
		doorbell.FromDevice()
		q.ci++
		ok, e := q.ctx.complete(c, &wc[n])
		if e != nil {
			err = q.cqeError(e)
			break
		}
		if !ok {
			q.stray++
			continue
		}
		n++
	}
	if q.ci != start { // publishCI, written out
		doorbell.ToDevice()
		doorbell.StoreRecord(q.ciRec, q.ci&0xffffff)
	}
	if !q.single {
		q.mu.Unlock()
	}
	return n, err
}

// setRing makes buf, a ring of 1<<log slots of cqeSize bytes, the one
// Poll reads. cqeAt reads it unchecked: a ring shorter than that is a bug.
func (q *cq) setRing(buf []byte, log uint32) {
	if log > 31 || len(buf) < q.cqeSize<<log {
		panic(fmt.Sprintf("mlx5: CQ ring of %d bytes for %d entries of %d", len(buf), uint64(1)<<log, q.cqeSize))
	}
	q.buf, q.log = buf, log
	q.mask = 1<<log - 1
	q.shift = uint32(bits.TrailingZeros(uint(q.cqeSize)))
	q.tail = uintptr(q.cqeSize - cqe64Size)
}

// next returns the CQE at the consumer index if it is new, else nil (not
// written yet, or a RESIZE CQE: the end of this ring, Resize moves on).
func (q *cq) next() *[cqe64Size]byte {
	c := q.cqeAt(q.ci)
	op := c[cqeOpOwn]
	if op>>4 == cqeInvalid || op>>4 == cqeResize || uint32(op&cqeOwnerMask) != (q.ci>>(q.log&31))&1 {
		return nil
	}
	return c
}

// publishCI writes the consumer index to the doorbell record.
func (q *cq) publishCI() {
	doorbell.ToDevice()
	doorbell.StoreRecord(q.ciRec, q.ci&0xffffff)
}

// cqeError is Poll's error for a CQE it cannot read (the CQE at ci-1).
func (q *cq) cqeError(e error) error {
	return fmt.Errorf("mlx5: CQ %d: CQE %d: %w", q.cqn, q.ci-1, e)
}

// errNoStamps is PollTimestamps' error on a CQ created without
// timestamps (preallocated: the fast path allocates nothing).
var errNoStamps = fmt.Errorf("mlx5: PollTimestamps: %w: the CQ was created without timestamps", provider.ErrNotSupported)

// PollTimestamps is Poll that also reads each CQE's timestamp (struct
// mlx5_cqe64's timestamp, big endian: the device's free-running clock,
// written when the CQ was created with IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION).
func (q *cq) PollTimestamps(wc []provider.WorkCompletion, ts []uint64) (int, error) {
	if !q.stamps {
		return 0, errNoStamps
	}
	return q.poll(wc, ts[:len(wc)], true)
}

var _ provider.PassPoller = (*cq)(nil)

// PollPass is Poll (PollTimestamps with ts) for a pass over the CQ
// (uverbs.CQPoll): the consumer index reaches the doorbell record at
// EndPass, as rdma-core's mlx5_end_poll writes it.
func (q *cq) PollPass(wc []provider.WorkCompletion, ts []uint64) (int, error) {
	return q.poll(wc, ts, false)
}

// EndPass writes the consumer index a pass reached to the doorbell record.
func (q *cq) EndPass() {
	q.mu.Lock()
	if q.halt.Load() == 0 {
		q.publishCI()
	}
	q.mu.Unlock()
}

// poll is Poll that also reads timestamps into ts when ts is not nil, and
// leaves the consumer index to EndPass when publish is false
// (PollTimestamps, PollPass).
func (q *cq) poll(wc []provider.WorkCompletion, ts []uint64, publish bool) (int, error) {
	q.mu.Lock()
	if q.halt.Load() != 0 {
		err := q.stopped()
		q.mu.Unlock()
		return 0, err
	}
	n := 0
	var err error
	start := q.ci
	for n < len(wc) {
		c := q.next()
		if c == nil {
			break
		}
		doorbell.FromDevice()
		q.ci++
		ok, e := q.ctx.complete(c, &wc[n])
		if e != nil {
			err = q.cqeError(e)
			break
		}
		if !ok {
			q.stray++
			continue
		}
		if ts != nil {
			ts[n] = be.Uint64(c[cqeTimestamp:])
		}
		n++
	}
	if publish && q.ci != start {
		q.publishCI()
	}
	q.mu.Unlock()
	return n, err
}

// clean removes from the CQ every CQE not yet polled whose key (user index
// with CQE version 1, QP number with version 0) is key: the CQEs of a QP
// that was reset or destroyed, which must not complete the WQEs of its next
// life or be reported after its end. The CQEs that stay move up over the
// removed ones, keeping their order and the owner bits of the slots they
// land in, and the consumer index moves past the freed slots. A removed
// receive CQE of a QP fed by s gives its WQE back to s's free list.
// The device writes no more CQEs for the QP (it is in RESET, or gone), so
// only CQEs already written are looked at; new ones of other QPs may land
// beyond them meanwhile. This is what rdma-core's __mlx5_cq_clean does.
func (q *cq) clean(key uint32, s *srq) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.halt.Load()&cqClosed != 0 {
		return
	}
	n := uint32(1) << q.log
	mask := n - 1
	slot := func(i uint32) []byte {
		off := int(i&mask) * q.cqeSize
		return q.buf[off : off+q.cqeSize : off+q.cqeSize]
	}
	end := q.ci
	for end-q.ci < n {
		op := slot(end)[q.cqeSize-cqe64Size+cqeOpOwn]
		if op>>4 == cqeInvalid || uint32(op&cqeOwnerMask) != (end>>q.log)&1 || op>>4 == cqeResize {
			break
		}
		end++
	}
	if end == q.ci {
		return
	}
	doorbell.FromDevice()
	v1 := q.ctx.cqeVersion == 1
	freed := uint32(0)
	for i := end; i != q.ci; {
		i--
		src := slot(i)
		e := src[q.cqeSize-cqe64Size:]
		k := be.Uint32(e[cqeSopDropQpn:]) & 0xffffff
		if v1 {
			k = be.Uint32(e[cqeSrqnUidx:]) & 0xffffff
		}
		if k == key {
			if s != nil && isResponder(e[cqeOpOwn]>>4) {
				s.retire(be.Uint16(e[cqeWqeCounter:]))
			}
			freed++
			continue
		}
		if freed > 0 {
			dst := slot(i + freed)
			own := dst[q.cqeSize-cqe64Size+cqeOpOwn] & cqeOwnerMask
			copy(dst, src)
			dst[q.cqeSize-cqe64Size+cqeOpOwn] = dst[q.cqeSize-cqe64Size+cqeOpOwn]&^cqeOwnerMask | own
		}
	}
	if freed == 0 {
		return
	}
	q.ci += freed
	q.publishCI()
}

// isResponder reports whether a CQE opcode is a receive's.
func isResponder(op uint8) bool {
	switch op {
	case cqeRespWrImm, cqeRespSend, cqeRespSendIm, cqeRespSendIv, cqeRespErr:
		return true
	}
	return false
}

// stopped is why Poll or Arm cannot run: the CQ is closed, its context's
// device is gone, or a resize left it without a ring. Called under q.mu.
func (q *cq) stopped() error {
	switch {
	case q.halt.Load()&cqClosed != 0:
		return errCQClosed
	case q.halt.Load()&cqLost != 0:
		return errDeviceLost
	}
	return q.dead
}

// halted is Poll's way out of a CQ that cannot be read: it unlocks q.mu
// (if Poll took it) and says why (kept out of Poll, which it would only
// lengthen).
func (q *cq) halted() error {
	err := q.stopped()
	if !q.single {
		q.mu.Unlock()
	}
	return err
}

// lose stops the CQ's fast path for good: the device is gone. It waits for
// a Poll or Arm in progress (it takes the lock), but for a single-threaded
// CQ's Poll, which takes none: that one may finish reading the ring, which
// stays mapped until Close.
func (q *cq) lose() {
	q.mu.Lock()
	q.halt.Or(cqLost)
	q.mu.Unlock()
}

var _ provider.TimestampPoller = (*cq)(nil)
