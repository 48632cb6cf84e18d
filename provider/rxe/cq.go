package rxe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
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
	return &setup[provider.CQCreated, provider.CQ]{
		out: make([]byte, binary.Size(abi.RxeCreateCqResp{})),
		complete: func(cr provider.CQCreated, out []byte) (provider.CQ, error) {
			var resp abi.RxeCreateCqResp
			copy(abi.Bytes(&resp), out)
			q, err := mapQueue(c.f, "completion", resp.Mi, wcSize)
			if err != nil {
				return nil, err
			}
			return &CQ{c: c, handle: cr.Handle, q: q, head: q.cons.Load() & q.mask}, nil
		},
	}, nil
}

// CQ is an rxe completion queue: the kernel produces ib_uverbs_wc entries
// (at the start of each slot, whose size the queue header gives: 128 bytes
// on 6.1) and user space consumes them.
//
// Poll has a single caller at a time (one poller per CQ) and must not run
// concurrently with Resize or Close; Arm may run from any goroutine.
type CQ struct {
	c      *Context
	handle uint32
	q      *queue
	head   uint32 // consumer index (masked), owned by the poller

	mu sync.Mutex // serializes Resize and Close
}

var _ provider.CQ = (*CQ)(nil)

// errCQClosed reports a poll of a closed or failed-resize CQ.
var errCQClosed = errors.New("rxe: completion queue is not mapped (closed, or a resize failed to remap it)")

// Poll copies up to len(wc) completions out of the queue: one load-acquire
// of the producer index, the entries, one store-release of the consumer
// index. It allocates nothing and makes no syscall.
func (cq *CQ) Poll(wc []provider.WorkCompletion) (int, error) {
	q := cq.q
	if q == nil || q.mem == nil {
		return 0, errCQClosed
	}
	prod := q.prod.Load() & q.mask // acquire: the entries before prod are complete
	head := cq.head
	n := 0
	for n < len(wc) && head != prod {
		toWC(&wc[n], q.wc(head))
		head = (head + 1) & q.mask
		n++
	}
	if n > 0 {
		cq.head = head
		q.cons.Store(head) // release: the kernel may reuse the slots
	}
	return n, nil
}

// toWC converts one kernel completion.
func toWC(w *provider.WorkCompletion, k *abi.IbUverbsWc) {
	flags := k.WcFlags
	var pf provider.WCFlags
	if flags&kwcGRH != 0 {
		pf |= provider.WCWithGRH
	}
	if flags&kwcIPCSumOK != 0 {
		pf |= provider.WCIPCSumOK
	}
	var imm uint32
	switch {
	case flags&kwcWithImm != 0:
		pf |= provider.WCWithImm
		imm = binary.BigEndian.Uint32(k.Ex[:]) // __be32 on the wire and in the CQE
	case flags&kwcWithInv != 0:
		pf |= provider.WCWithInv
		imm = binary.NativeEndian.Uint32(k.Ex[:])
	}
	*w = provider.WorkCompletion{
		ID:           k.WrId,
		Status:       provider.WCStatus(k.Status),
		Opcode:       provider.WCOpcode(k.Opcode),
		VendorErr:    k.VendorErr,
		ByteLen:      k.ByteLen,
		Imm:          imm,
		QPNum:        k.QpNum,
		SrcQP:        k.SrcQp,
		Flags:        pf,
		PKeyIndex:    k.PkeyIndex,
		SLID:         k.Slid,
		SL:           k.Sl,
		DLIDPathBits: k.DlidPathBits,
		Port:         k.PortNum,
	}
}

// Arm asks the kernel (REQ_NOTIFY_CQ) for one completion event on the next
// completion, or the next solicited one.
func (cq *CQ) Arm(solicitedOnly bool) error {
	return cq.c.k.ReqNotifyCQ(cq.handle, solicitedOnly)
}

// Event does nothing: rxe keeps no arm sequence in user space.
func (cq *CQ) Event() {}

// Resize prepares RESIZE_CQ: the kernel copies the unpolled entries into a
// new queue and answers with its mmap info (struct rxe_resize_cq_resp);
// Complete unmaps the old queue and maps the new one. It must not run
// concurrently with Poll.
func (cq *CQ) Resize(cqe int) (provider.Setup[uint32, struct{}], error) {
	if cqe <= 0 {
		return nil, fmt.Errorf("rxe: resize CQ to %d entries: %w", cqe, errInvalid)
	}
	return &setup[uint32, struct{}]{
		out: make([]byte, binary.Size(abi.RxeResizeCqResp{})),
		complete: func(_ uint32, out []byte) (struct{}, error) {
			var resp abi.RxeResizeCqResp
			copy(abi.Bytes(&resp), out)
			cq.mu.Lock()
			defer cq.mu.Unlock()
			// The old mapping keeps the old buffer alive in the kernel
			// until it is unmapped; nothing reads it any more.
			old := cq.q
			cq.q = nil
			if err := old.close(); err != nil {
				return struct{}{}, err
			}
			q, err := mapQueue(cq.c.f, "completion", resp.Mi, wcSize)
			if err != nil {
				return struct{}{}, err
			}
			cq.q, cq.head = q, q.cons.Load()&q.mask
			return struct{}{}, nil
		},
	}, nil
}

// Close unmaps the queue; uverbs calls it after the kernel CQ is destroyed.
func (cq *CQ) Close() error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	q := cq.q
	cq.q = nil
	return q.close()
}
