package rxe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/doorbell"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/provider/internal/pollgate"
)

// Completion flags as the kernel writes them into ib_uverbs_wc.wc_flags:
// enum ib_wc_flags (rdma/ib_verbs.h), copied unchanged by rxe and by the
// core's POLL_CQ. Bits 2 and 3 are swapped against libibverbs' enum
// ibv_wc_flags (WITH_INV is 1<<3 there, IP_CSUM_OK 1<<2); package provider
// uses libibverbs' values, so they are translated.
const (
	kwcGRH      = 1 << 0 // IB_WC_GRH
	kwcWithImm  = 1 << 1 // IB_WC_WITH_IMM
	kwcWithInv  = 1 << 2 // IB_WC_WITH_INVALIDATE
	kwcIPCSumOK = 1 << 3 // IB_WC_IP_CSUM_OK
)

// CreateCQ prepares a CQ: the driver response is struct rxe_create_cq_resp,
// the mmap info of the queue the kernel allocates.
func (c *Context) CreateCQ(a provider.CQAttr) (provider.Setup[provider.CQCreated, provider.CQ], error) {
	return &cqSetup{cq: CQ{c: c, single: a.SingleThreaded}}, nil
}

// cqSetup is CreateCQ's setup and, once complete, the CQ's memory: one
// allocation where a SetupFunc, its closure, the response buffer and the
// CQ were four (as ahSetup).
type cqSetup struct {
	cq   CQ
	resp abi.RxeCreateCqResp
}

// Udata is the response buffer: struct rxe_create_cq_resp.
func (s *cqSetup) Udata() (in, out []byte) { return nil, abi.Bytes(&s.resp) }

// Complete maps the queue and returns the CQ.
func (s *cqSetup) Complete(cr provider.CQCreated) (provider.CQ, error) {
	q, err := mapQueue(s.cq.c.f, "completion", s.resp.Mi, wcSize)
	if err != nil {
		return nil, err
	}
	s.cq.handle = cr.Handle
	s.cq.st.Store(newCQState(q))
	return &s.cq, nil
}

// Abort does nothing: the setup holds no resource.
func (s *cqSetup) Abort() {}

// CQ is an rxe completion queue: the kernel produces ib_uverbs_wc entries
// (at the start of each slot, whose size the queue header gives: 128 bytes
// on 6.1) and user space consumes them.
//
// Poll has a single caller at a time (one poller per CQ). It may run
// concurrently with Close and Resize, from any goroutine: they replace the
// state, wait for the Poll inside the old one's gate and only then unmap its
// queue, so Poll never reads released memory; after Close it returns an
// error wrapping provider.ErrClosed. Arm may run from any goroutine.
type CQ struct {
	c      *Context
	handle uint32
	st     atomic.Pointer[cqState] // the current queue, or why there is none
	// single: created with CQAttr.SingleThreaded. Poll then does not
	// enter its state's gate: the program orders it with Resize and
	// Close, so no swap happens while it reads.
	single bool

	mu sync.Mutex // serializes Resize and Close
}

// cqState is what Poll works on: the mapped queue and its consumer index,
// or (q nil) the error every Poll returns.
type cqState struct {
	q    *queue
	head uint32 // consumer index (masked), owned by the poller
	err  error
	// gate holds the Poll reading q. Close and Resize swap the state and
	// then wait for the old one's poller to leave before they unmap q
	// (release): one locked instruction a Poll (two atomic adds until
	// session 40), against what made the release safe before (until
	// session 22), an mmap of private memory over the queue and a munmap
	// at GC, which cost a CQ's destroy 35-45 µs of its 120 under TCG
	// (docs/COST.md, session 22).
	gate pollgate.Gate
}

var _ provider.CQ = (*CQ)(nil)

// errCQClosed reports a poll of a closed CQ.
var errCQClosed = fmt.Errorf("rxe: completion queue: %w", provider.ErrClosed)

// closedCQ is every closed CQ's state, shared: a state without a queue is
// never written (Poll and Arm return its err before they touch a field),
// and one allocation less at each Close.
var closedCQ = &cqState{err: errCQClosed}

func newCQState(q *queue) *cqState { return &cqState{q: q, head: q.cons.Load() & q.mask} }

// Poll copies up to len(wc) completions out of the queue: one load-acquire
// of the producer index, the entries, one store-release of the consumer
// index. It allocates nothing, makes no syscall and takes no lock. It
// enters its state's gate and checks the state is still current before it
// reads the queue: a concurrent Close or Resize swaps the state, waits for
// the old one's gate to empty and then unmaps, so the entries read are
// real ones; Poll publishes them only if its state is still current. A
// single-threaded CQ's Poll skips the gate and the checks (one locked
// instruction): nothing swaps the state while it runs.
func (cq *CQ) Poll(wc []provider.WorkCompletion) (int, error) {
	s := cq.st.Load()
	q := s.q
	if q == nil {
		return 0, s.err
	}
	if !cq.single {
		s.gate.Enter()
		if cur := cq.st.Load(); cur != s {
			// Swapped between the two loads: the swapper may have found
			// the gate empty and unmapped q already.
			s.gate.Leave()
			if cur.q == nil {
				return 0, cur.err
			}
			return 0, nil // resized: the next Poll reads the new queue
		}
	}
	prod := q.prod.Load() & q.mask // acquire: the entries before prod are complete
	head := s.head
	n := 0
	for n < len(wc) && head != prod {
		k := q.wc(head)
		w := &wc[n]
		if !toWC(w, k) {
			toWCFlags(w, k)
		}
		if st := w.Status; st != provider.WCSuccess && st != provider.WCWRFlushErr {
			cq.c.errorCompletion(w.QPNum)
		}
		head = (head + 1) & q.mask
		n++
	}
	if n > 0 {
		if cur := cq.st.Load(); cur != s { // never, if single
			// Closed, or resized: the kernel moved the unpolled
			// entries to the new queue; read them there next time.
			if !cq.single {
				s.gate.Leave()
			}
			if cur.q == nil {
				return 0, cur.err
			}
			return 0, nil
		}
		s.head = head
		doorbell.Publish32(q.cons, head) // release: the kernel may reuse the slots
	}
	if !cq.single {
		s.gate.Leave()
	}
	return n, nil
}

// release unmaps s's queue once no Poll reads it. s has been replaced
// (Close, Resize: cq.mu held), so a Poll that loads it from now on sees
// the swap at its second load and leaves without reading; one that
// entered the gate before is waited for (pollgate).
func (s *cqState) release() error {
	s.gate.Wait()
	return s.q.close()
}

// toWC converts one kernel completion: one 48-byte copy (provider's
// WorkCompletion has ib_uverbs_wc's layout and, but for the flags and the
// immediate, its values: wcView), then the immediate. GRH and WITH_IMM are
// the same bits in the kernel's enum and libibverbs', so a completion with
// no other flag (every send completion, and rsocket's WRITE_WITH_IMMs)
// needs no translation. It reports false for the others, whose flags the
// caller then translates out of line (toWCFlags): toWC itself stays small
// enough to be inlined into Poll's loop. Field by field, with every flag
// translated out of line, a completion took 22 instructions more
// (callgrind, BenchmarkICount FakePoll: 134 a poll of one, now 112), and
// one with an immediate 42 more again (test/perf/rstreamcg.sh: rsocket's
// 64-byte transfer, one such completion a side).
func toWC(w *provider.WorkCompletion, k *abi.IbUverbsWc) bool {
	*w = *wcView(k)
	switch f := k.WcFlags; {
	case f == 0: // the common case first
		w.Imm = 0 // the kernel clears ex when there is no immediate; keep 0 whatever it holds
	case f&^(kwcGRH|kwcWithImm) != 0:
		return false
	case f&kwcWithImm != 0:
		w.Imm = binary.BigEndian.Uint32(k.Ex[:]) // __be32 on the wire and in the CQE
	default: // GRH alone
		w.Imm = 0
	}
	return true
}

// toWCFlags sets w's Flags and Imm from k's flags.
//
//go:noinline
func toWCFlags(w *provider.WorkCompletion, k *abi.IbUverbsWc) {
	flags := k.WcFlags
	var pf provider.WCFlags
	w.Imm = 0 // toWC copied ex in
	if flags&kwcGRH != 0 {
		pf |= provider.WCWithGRH
	}
	if flags&kwcIPCSumOK != 0 {
		pf |= provider.WCIPCSumOK
	}
	switch {
	case flags&kwcWithImm != 0:
		pf |= provider.WCWithImm
		w.Imm = binary.BigEndian.Uint32(k.Ex[:]) // __be32 on the wire and in the CQE
	case flags&kwcWithInv != 0:
		pf |= provider.WCWithInv
		w.Imm = binary.NativeEndian.Uint32(k.Ex[:])
	}
	w.Flags = pf
}

// Arm asks the kernel (REQ_NOTIFY_CQ) for one completion event on the next
// completion, or the next solicited one.
func (cq *CQ) Arm(solicitedOnly bool) error {
	if s := cq.st.Load(); s.q == nil {
		return s.err
	}
	return cq.c.k.ReqNotifyCQ(cq.handle, solicitedOnly)
}

// Event does nothing: rxe keeps no arm sequence in user space.
func (cq *CQ) Event() {}

// Resize prepares RESIZE_CQ: the kernel copies the unpolled entries into a
// new queue and answers with its mmap info (struct rxe_resize_cq_resp);
// Complete maps the new queue, makes it current and retires the old one.
// If the new queue cannot be mapped, the kernel has switched to it all the
// same: Poll then returns that error (the CQ is not silently dead) until a
// later Resize maps a queue again.
func (cq *CQ) Resize(cqe int) (provider.Setup[uint32, struct{}], error) {
	if cqe <= 0 {
		return nil, fmt.Errorf("rxe: resize CQ to %d entries: %w", cqe, errInvalid)
	}
	return &provider.SetupFunc[uint32, struct{}]{
		Out: make([]byte, binary.Size(abi.RxeResizeCqResp{})),
		Done: func(_ uint32, out []byte) (struct{}, error) {
			var resp abi.RxeResizeCqResp
			copy(abi.Bytes(&resp), out)
			cq.mu.Lock()
			defer cq.mu.Unlock()
			old := cq.st.Load()
			if old.q == nil && errors.Is(old.err, provider.ErrClosed) {
				return struct{}{}, errCQClosed
			}
			q, err := mapQueue(cq.c.f, "completion", resp.Mi, wcSize)
			if err != nil {
				err = fmt.Errorf("rxe: CQ resized by the kernel, but its new queue cannot be mapped (resize again, or close it): %w", err)
				cq.st.Store(&cqState{err: err})
			} else {
				cq.st.Store(newCQState(q))
			}
			// The old mapping keeps the old buffer alive in the kernel
			// until it is unmapped; nothing reads it any more but a Poll
			// already running, which sees its state replaced.
			if old.q != nil {
				if rerr := old.release(); rerr != nil && err == nil {
					err = rerr
				}
			}
			return struct{}{}, err
		},
	}, nil
}

// Close unmaps the queue; uverbs calls it after the kernel CQ is
// destroyed. A Poll running meanwhile is waited for (it returns ErrClosed
// or what it read before the swap); every later Poll and Arm returns
// ErrClosed.
func (cq *CQ) Close() error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	old := cq.st.Load()
	if old.q == nil && errors.Is(old.err, provider.ErrClosed) {
		return nil
	}
	cq.st.Store(closedCQ)
	if old.q != nil {
		return old.release()
	}
	return nil
}
