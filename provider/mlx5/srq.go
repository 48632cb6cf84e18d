package mlx5

import (
	"fmt"
	"math/bits"
	"sync"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/doorbell"
	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/provider"
)

// srq is a shared receive queue: WQEs linked into a free list through their
// next segments, which the device follows as it consumes them.
type srq struct {
	ctx    *context
	mem    *mmap.Region
	ring   []byte
	shift  uint32  // WQE size is 1<<shift
	cnt    uint32  // WQEs in the ring (power of two); cnt-1 can be posted
	maxSGE uint32  // as created
	rec    *uint32 // the doorbell record's receive counter (after the ring)
	uidx   uint32
	srqn   uint32
	xrc    bool // an XRC SRQ: found by its number in CQEs of version 0

	mu      sync.Mutex
	head    uint32 // next free WQE to post into
	tail    uint32 // last free WQE: freed WQEs are linked after it
	free    uint32 // WQEs that can be posted
	counter uint32 // WQEs posted, for the doorbell record
	wrid    []uint64
	closed  bool
}

// srqSize is the SRQ geometry the kernel derives from max_wr and max_sge
// (mlx5_ib_create_srq): pow2(max_wr+1) WQEs of max(32, pow2(16+16·max_sge))
// bytes. The provider must lay out the same ring.
func srqSize(maxWR, maxSGE uint32) (cnt, shift uint32) {
	cnt = pow2(maxWR + 1)
	size := max(pow2(srqNextSize+maxSGE*dataSize), 32)
	return cnt, uint32(bits.TrailingZeros32(size))
}

type srqSetup struct {
	s   *srq
	in  abi.Mlx5IbCreateSrq
	out abi.Mlx5IbCreateSrqResp
	ib  []byte
	ob  []byte
}

// CreateSRQ lays out the SRQ ring as the kernel will size it and prepares
// the create command's driver data.
func (c *context) CreateSRQ(a provider.SRQAttr) (provider.Setup[provider.SRQCreated, provider.SRQ], error) {
	if a.MaxWR == 0 || a.MaxWR >= 1<<20 || a.MaxSGE > 64 {
		return nil, fmt.Errorf("mlx5: CreateSRQ: %w", invalid("%d WRs of %d SGEs", a.MaxWR, a.MaxSGE))
	}
	cnt, shift := srqSize(a.MaxWR, a.MaxSGE)
	ringLen := int(cnt << shift)
	mem, err := mmap.AnonymousOpts(ringLen+dbRecSize, mmap.Options{CopyOnFork: c.copyOnFork})
	if err != nil {
		return nil, fmt.Errorf("mlx5: CreateSRQ: %w", err)
	}
	s := &srq{ctx: c, mem: mem, ring: mem.Bytes()[:ringLen], shift: shift, cnt: cnt, maxSGE: a.MaxSGE,
		rec: word(mem, ringLen+4*qpDBRecv), wrid: make([]uint64, cnt), head: 0, tail: cnt - 1, free: cnt - 1, xrc: a.XRC}
	for i := uint32(0); i < cnt; i++ {
		be.PutUint16(s.ring[int(i<<shift)+srqNextWqeIndex:], uint16((i+1)&(cnt-1)))
	}
	st := &srqSetup{s: s}
	st.in.BufAddr = uint64(mem.Addr())
	st.in.DbAddr = uint64(mem.Addr()) + uint64(ringLen)
	if c.cqeVersion == 1 {
		u, err := c.allocUidx(&rsc{srq: s})
		if err != nil {
			mem.Close()
			return nil, err
		}
		s.uidx = u
		st.in.Uidx = u
	}
	st.ib = append([]byte(nil), abi.Bytes(&st.in)...)
	st.ob = make([]byte, len(abi.Bytes(&st.out)))
	return st, nil
}

func (st *srqSetup) Udata() (in, out []byte) { return st.ib, st.ob }

func (st *srqSetup) Complete(c provider.SRQCreated) (provider.SRQ, error) {
	copy(abi.Bytes(&st.out), st.ob)
	st.s.srqn = st.out.Srqn
	st.s.registerXRC()
	if err := st.s.ctx.track(st.s); err != nil {
		st.s.release()
		return nil, fmt.Errorf("mlx5: CreateSRQ: %w", err)
	}
	return st.s, nil
}

func (st *srqSetup) Abort() { st.s.release() }

func (s *srq) release() {
	s.unregisterXRC()
	if s.uidx != 0 {
		s.ctx.rsc.set(s.uidx, nil)
		s.uidx = 0
	}
	s.mem.Close()
}

// Close releases the ring, after the kernel SRQ is destroyed.
func (s *srq) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.ctx.forget(s)
	s.release()
	return nil
}

// retire completes the WQE the device reported by index and links it back
// into the free list. It takes the SRQ's lock: the CQs of the QPs it
// feeds may be polled at once, and a single-threaded CQ's Poll takes no
// lock of its own.
func (s *srq) retire(counter uint16) uint64 {
	s.mu.Lock()
	i := uint32(counter) & (s.cnt - 1)
	id := s.wrid[i]
	if !s.closed {
		be.PutUint16(s.ring[int(s.tail<<s.shift)+srqNextWqeIndex:], uint16(i))
	}
	s.tail = i
	s.free++
	s.mu.Unlock()
	return id
}

// PostRecv validates every WR, then fills free WQEs along the free list and
// writes the posted count to the doorbell record.
func (s *srq) PostRecv(wrs []provider.RecvWR) (int, error) {
	if len(wrs) == 0 {
		return 0, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, &provider.WRError{Provider: "mlx5", Verb: "PostSRQRecv", Err: provider.ErrClosed}
	}
	if s.ctx.lost.Load() {
		return 0, &provider.WRError{Provider: "mlx5", Verb: "PostSRQRecv", Err: errDeviceLost}
	}
	for i := range wrs {
		err := provider.CheckRecv(s.maxSGE, &wrs[i])
		if err == nil && uint32(i) >= s.free {
			err = fmt.Errorf("%w: the SRQ is full (%d WQEs posted)", errNoMemory, s.cnt-1-s.free+uint32(i))
		}
		if err != nil {
			return i, &provider.WRError{Provider: "mlx5", Verb: "PostSRQRecv", Index: i, Err: err}
		}
	}
	size := 1 << s.shift
	for i := range wrs {
		off := int(s.head << s.shift)
		w := s.ring[off : off+size : off+size]
		buildRecv(w[srqNextSize:], wrs[i].SGL)
		s.wrid[s.head] = wrs[i].ID
		s.head = uint32(be.Uint16(w[srqNextWqeIndex:])) & (s.cnt - 1)
	}
	s.free -= uint32(len(wrs))
	s.counter += uint32(len(wrs))
	doorbell.ToDevice()
	doorbell.StoreRecord(s.rec, s.counter&0xffff)
	return len(wrs), nil
}
