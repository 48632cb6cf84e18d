package siw

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/doorbell"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/provider/internal/pollgate"
)

// CreateCQ prepares a CQ: the driver response is struct
// siw_uresp_create_cq {cq_id, num_cqe, cq_key}; the mapping holds num_cqe
// siw_cqe entries followed by struct siw_cq_ctrl, the notification word.
func (c *Context) CreateCQ(a provider.CQAttr) (provider.Setup[provider.CQCreated, provider.CQ], error) {
	return &cqSetup{cq: CQ{c: c, single: a.SingleThreaded}}, nil
}

// cqSetup is CreateCQ's setup and, once complete, the CQ's memory: one
// allocation where a SetupFunc, its closure, the response buffer and the
// CQ were four (as rxe's ahSetup).
type cqSetup struct {
	cq   CQ
	resp abi.SiwUrespCreateCq
}

// Udata is the response buffer: struct siw_uresp_create_cq.
func (s *cqSetup) Udata() (in, out []byte) { return nil, abi.Bytes(&s.resp) }

// Complete maps the ring and returns the CQ.
func (s *cqSetup) Complete(cr provider.CQCreated) (provider.CQ, error) {
	r, err := mapRing(s.cq.c.f, "completion queue", s.resp.CqKey, s.resp.NumCqe, cqeSize, ctrlSize)
	if err != nil {
		return nil, err
	}
	s.cq.handle, s.cq.id = cr.Handle, s.resp.CqId
	r.ctrl().Store(abi.SIW_NOTIFY_NOT)
	s.cq.st.Store(&cqState{r: r})
	return &s.cq, nil
}

// Abort does nothing: the setup holds no resource.
func (s *cqSetup) Abort() {}

// CQ is a siw completion queue: the kernel writes siw_cqe entries and sets
// their valid flag; Poll copies valid entries and clears the flag, which
// hands the entry back to the kernel.
//
// Poll has a single caller at a time (one poller per CQ), takes no lock
// and may run concurrently with Close from any goroutine: Close replaces
// the state, waits for the Poll in the old one's gate and the Arms counted
// on it, and only then unmaps the ring. Arm may run from any goroutine.
type CQ struct {
	c      *Context
	handle uint32
	id     uint32
	st     atomic.Pointer[cqState]
	// single: created with CQAttr.SingleThreaded. Poll then does not
	// enter its state's gate: the program orders it with Close.
	single bool

	mu sync.Mutex // serializes Close
}

// cqState is what Poll works on: the ring and its next entry, or (r nil)
// the error every Poll returns.
type cqState struct {
	r   *ring
	get uint32 // owned by the poller
	err error
	// gate holds the Poll using r (one poller: one locked instruction a
	// Poll) and readers counts the Arms (from any goroutine): Close waits
	// for both before it unmaps r (release; rxe's CQ does the same, and
	// says why).
	gate    pollgate.Gate
	readers atomic.Int32
}

// enter counts a reader (an Arm) on s, the state cq.st held a moment ago,
// and reports whether s is still current; if not, the reader is uncounted
// again and must not touch s.r (Close may have unmapped it already).
func (cq *CQ) enter(s *cqState) bool {
	s.readers.Add(1)
	if cq.st.Load() != s {
		s.readers.Add(-1)
		return false
	}
	return true
}

// enterPoll is enter for the poller: it enters s's gate instead.
func (cq *CQ) enterPoll(s *cqState) bool {
	s.gate.Enter()
	if cq.st.Load() != s {
		s.gate.Leave()
		return false
	}
	return true
}

// release unmaps s's ring once no Poll or Arm uses it; s has been
// replaced (Close, cq.mu held), so new ones leave at enter or enterPoll.
func (s *cqState) release() error {
	s.gate.Wait()
	for s.readers.Load() != 0 {
		runtime.Gosched()
	}
	return s.r.close()
}

var _ provider.CQ = (*CQ)(nil)

var errCQClosed = fmt.Errorf("siw: completion queue: %w", provider.ErrClosed)

// closedCQ is every closed CQ's state, shared: a state without a queue is
// never written (Poll and Arm return its err before they touch a field),
// and one allocation less at each Close.
var closedCQ = &cqState{err: errCQClosed}

// Poll copies up to len(wc) valid entries, clearing each one's flags as it
// goes. It allocates nothing, makes no syscall and takes no lock.
func (cq *CQ) Poll(wc []provider.WorkCompletion) (int, error) {
	s := cq.st.Load()
	r := s.r
	if r == nil {
		return 0, s.err
	}
	if cq.c.lost.Load() {
		return 0, errDeviceLost
	}
	if !cq.single && !cq.enterPoll(s) {
		if cur := cq.st.Load(); cur.r == nil {
			return 0, cur.err
		}
		return 0, nil
	}
	get := s.get
	n := 0
	for ; n < len(wc); n++ {
		e, w := r.cqEntry(get)
		v := w.Load() // acquire: the entry is complete once its flag is set
		if v&cqeWord(abi.SIW_WQE_VALID, 0, 0) == 0 {
			break
		}
		if !cq.single && cq.st.Load() != s {
			break // closed meanwhile: the kernel CQ is gone
		}
		// The completion, written field by field (toWC, by hand: it is
		// too big to inline, and a composite literal is built on the
		// stack and copied).
		flags, op, status := cqeFields(v)
		c := &wc[n]
		*c = provider.WorkCompletion{}
		c.ID = e.Id
		c.ByteLen = e.Bytes
		c.QPNum = uint32(e.QpId())
		c.Opcode = wcOpcode[op]
		if int(status) < len(wcStatus) {
			c.Status = wcStatus[status]
		} else {
			c.Status = provider.WCGeneralErr
			c.VendorErr = uint32(status)
		}
		if flags&abi.SIW_WQE_REM_INVAL != 0 {
			c.Flags = provider.WCWithInv
			c.Imm = e.InvalStag()
		}
		doorbell.Publish32(w, 0) // release: the kernel may reuse the entry
		get++
	}
	if !cq.single {
		s.gate.Leave()
	}
	if n == 0 {
		if cur := cq.st.Load(); cur.r == nil {
			return 0, cur.err
		}
		return 0, nil
	}
	s.get = get
	return n, nil
}

// wcOpcode maps a CQE's siw_opcode to the completion opcode (libibverbs'
// ibv_wc_opcode values); every byte has an entry, so Poll indexes it with
// no check (wcUnknown for what siw never completes to user space).
var wcOpcode = func() (t [256]provider.WCOpcode) {
	for i := range t {
		t[i] = wcUnknown
	}
	t[abi.SIW_OP_WRITE] = provider.WCRDMAWrite
	t[abi.SIW_OP_READ] = provider.WCRDMARead
	t[abi.SIW_OP_READ_LOCAL_INV] = provider.WCRDMARead
	t[abi.SIW_OP_SEND] = provider.WCSend
	t[abi.SIW_OP_SEND_WITH_IMM] = provider.WCSend
	t[abi.SIW_OP_SEND_REMOTE_INV] = provider.WCSend
	t[abi.SIW_OP_FETCH_AND_ADD] = provider.WCFetchAdd
	t[abi.SIW_OP_COMP_AND_SWAP] = provider.WCCompSwap
	t[abi.SIW_OP_RECEIVE] = provider.WCRecv
	t[abi.SIW_OP_INVAL_STAG] = provider.WCLocalInv
	// SIW_OP_READ_RESPONSE is provider-internal and never completed;
	// SIW_OP_REG_MR comes from kernel clients only.
	return t
}()

// wcUnknown is the opcode of a completion siw should never produce.
const wcUnknown = provider.WCOpcode(0xff)

// wcStatus maps enum siw_wc_status to ibv_wc_status.
var wcStatus = [abi.SIW_NUM_WC_STATUS]provider.WCStatus{
	abi.SIW_WC_SUCCESS:         provider.WCSuccess,
	abi.SIW_WC_LOC_LEN_ERR:     provider.WCLocLenErr,
	abi.SIW_WC_LOC_PROT_ERR:    provider.WCLocProtErr,
	abi.SIW_WC_LOC_QP_OP_ERR:   provider.WCLocQPOpErr,
	abi.SIW_WC_WR_FLUSH_ERR:    provider.WCWRFlushErr,
	abi.SIW_WC_BAD_RESP_ERR:    provider.WCBadRespErr,
	abi.SIW_WC_LOC_ACCESS_ERR:  provider.WCLocAccessErr,
	abi.SIW_WC_REM_ACCESS_ERR:  provider.WCRemAccessErr,
	abi.SIW_WC_REM_INV_REQ_ERR: provider.WCRemInvReqErr,
	abi.SIW_WC_GENERAL_ERR:     provider.WCGeneralErr,
}

// Arm sets the CQ's mapped notification word (siw_cq_ctrl.flags): the
// kernel raises one completion event for the next completion (any, or a
// solicited one) and clears the word. No syscall.
func (cq *CQ) Arm(solicitedOnly bool) error {
	s := cq.st.Load()
	if s.r == nil {
		return s.err
	}
	if cq.c.lost.Load() {
		return errDeviceLost
	}
	v := uint32(abi.SIW_NOTIFY_SOLICITED | abi.SIW_NOTIFY_NEXT_COMPLETION)
	if solicitedOnly {
		v = abi.SIW_NOTIFY_SOLICITED
	}
	if !cq.enter(s) {
		return cq.st.Load().err // closed meanwhile (siw has no resize)
	}
	s.r.ctrl().Store(v)
	s.readers.Add(-1)
	return nil
}

// Event does nothing: the kernel disarms the word itself.
func (cq *CQ) Event() {}

// Resize: siw cannot resize a CQ (the kernel has no resize_cq).
func (cq *CQ) Resize(int) (provider.Setup[uint32, struct{}], error) {
	return nil, fmt.Errorf("siw: resize CQ: %w", provider.ErrNotSupported)
}

// Close unmaps the ring once the Polls and Arms using it have left;
// uverbs calls it after the kernel CQ is destroyed. Every later Poll and
// Arm returns ErrClosed.
func (cq *CQ) Close() error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	old := cq.st.Load()
	if old.r == nil && errors.Is(old.err, provider.ErrClosed) {
		return nil
	}
	cq.st.Store(closedCQ)
	if old.r != nil {
		return old.release()
	}
	return nil
}
