package rxe

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// Every unsafe.Pointer of the package lives in this file: the views of the
// queue mappings as the kernel's C structs, and the read of user memory for
// inline sends.

// Offsets in struct rxe_queue_buf (rdma/rdma_user_rxe.h), checked against the
// generated layout by TestQueueBufLayout.
const (
	queueHdrSize  = int(unsafe.Sizeof(abi.RxeQueueBuf{}))
	offLog2       = int(unsafe.Offsetof(abi.RxeQueueBuf{}.Log2ElemSize))
	offIndexMask  = int(unsafe.Offsetof(abi.RxeQueueBuf{}.IndexMask))
	offProducer   = int(unsafe.Offsetof(abi.RxeQueueBuf{}.ProducerIndex))
	offConsumer   = int(unsafe.Offsetof(abi.RxeQueueBuf{}.ConsumerIndex))
	sendWQESize   = int(unsafe.Sizeof(abi.RxeSendWqe{}))
	recvWQESize   = int(unsafe.Sizeof(abi.RxeRecvWqe{}))
	sgeSize       = int(unsafe.Sizeof(abi.RxeSge{}))
	wcSize        = int(unsafe.Sizeof(abi.IbUverbsWc{}))
	avSize        = int(unsafe.Sizeof(abi.RxeAv{}))
	udAVOffset    = int(unsafe.Offsetof(abi.RxeSendWrWrUd{}.Av)) // in rxe_send_wr.wr
	maxSlotLog2   = 20                                           // 1 MiB slots: far above anything rxe makes; a sanity bound
	maxQueueSlots = 1 << 24
)

// queue is one rxe queue (rxe_queue_buf) mapped from the command file: a
// header with the element size, the index mask and the producer and consumer
// indices (each on its own cache line), then the slots. Indices are stored
// masked. The mapping is unmapped by close.
type queue struct {
	f    *abi.File
	mem  []byte         // the mapping; nil after close
	data unsafe.Pointer // first slot
	prod *atomic.Uint32 // producer_index
	cons *atomic.Uint32 // consumer_index
	log2 uint32         // log2 of the slot size
	mask uint32         // slots − 1
	mi   abi.Mminfo
}

// mapQueue maps the queue the kernel described in mi and checks its header:
// the slot size must be a power of two of at least minSlot bytes, and every
// slot must lie inside the mapping.
func mapQueue(f *abi.File, what string, mi abi.Mminfo, minSlot int) (*queue, error) {
	if mi.Size == 0 || int(mi.Size) < queueHdrSize {
		return nil, fmt.Errorf("rxe: %s queue: kernel returned mmap info {offset %#x, size %d}: too small for a queue header", what, mi.Offset, mi.Size)
	}
	mem, err := f.Mmap(int64(mi.Offset), int(mi.Size))
	if err != nil {
		return nil, fmt.Errorf("rxe: mapping the %s queue ({offset %#x, size %d}) from %s: %w", what, mi.Offset, mi.Size, f.Path(), err)
	}
	q, err := newQueue(mem, what, minSlot)
	if err != nil {
		f.Munmap(mem)
		return nil, err
	}
	q.f, q.mi = f, mi
	return q, nil
}

// newQueue views mem as a queue (mapQueue's checks; the fakes in the tests
// call it directly).
func newQueue(mem []byte, what string, minSlot int) (*queue, error) {
	if len(mem) < queueHdrSize {
		return nil, fmt.Errorf("rxe: %s queue: mapping of %d bytes is smaller than the %d-byte header", what, len(mem), queueHdrSize)
	}
	base := unsafe.Pointer(unsafe.SliceData(mem))
	if uintptr(base)&63 != 0 {
		return nil, fmt.Errorf("rxe: %s queue: mapping is not cache-line aligned", what)
	}
	log2 := (*atomic.Uint32)(unsafe.Add(base, offLog2)).Load()
	mask := (*atomic.Uint32)(unsafe.Add(base, offIndexMask)).Load()
	slots := uint64(mask) + 1
	switch {
	case log2 > maxSlotLog2 || 1<<log2 < minSlot:
		return nil, fmt.Errorf("rxe: %s queue: slot size 2^%d is not in [%d, 2^%d]", what, log2, minSlot, maxSlotLog2)
	case slots&(slots-1) != 0 || slots < 2 || slots > maxQueueSlots:
		return nil, fmt.Errorf("rxe: %s queue: index mask %#x is not 2^n−1 with 1 ≤ n ≤ 24", what, mask)
	case uint64(queueHdrSize)+slots<<log2 > uint64(len(mem)):
		return nil, fmt.Errorf("rxe: %s queue: %d slots of %d bytes do not fit a mapping of %d bytes", what, slots, 1<<log2, len(mem))
	}
	return &queue{
		mem:  mem,
		data: unsafe.Add(base, queueHdrSize),
		prod: (*atomic.Uint32)(unsafe.Add(base, offProducer)),
		cons: (*atomic.Uint32)(unsafe.Add(base, offConsumer)),
		log2: log2,
		mask: mask,
	}, nil
}

// slotSize is the size of one slot in bytes.
func (q *queue) slotSize() int { return 1 << q.log2 }

// slot returns the address of slot i (masked). Its bytes stay valid until
// close; newQueue checked that every slot lies inside the mapping.
func (q *queue) slot(i uint32) unsafe.Pointer {
	return unsafe.Add(q.data, uintptr(i&q.mask)<<q.log2)
}

// sendWQE views slot i as struct rxe_send_wqe.
func (q *queue) sendWQE(i uint32) *abi.RxeSendWqe { return (*abi.RxeSendWqe)(q.slot(i)) }

// recvWQE views slot i as struct rxe_recv_wqe.
func (q *queue) recvWQE(i uint32) *abi.RxeRecvWqe { return (*abi.RxeRecvWqe)(q.slot(i)) }

// wc views slot i as struct ib_uverbs_wc (the start of an rxe CQE).
func (q *queue) wc(i uint32) *abi.IbUverbsWc { return (*abi.IbUverbsWc)(q.slot(i)) }

// wqeSGEs is the SGE array of send WQE w (a slot of a send queue); n
// must fit the slot (the QP checked that at creation).
func wqeSGEs(w *abi.RxeSendWqe, n int) []abi.RxeSge {
	return unsafe.Slice((*abi.RxeSge)(unsafe.Add(unsafe.Pointer(w), sendWQESize)), n)
}

// wqeInline is the inline-data area of send WQE w, where its SGEs would
// be: n bytes, which the QP's inline cap let fit in its slot.
func wqeInline(w *abi.RxeSendWqe, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(w), sendWQESize)), n)
}

// recvSGEs is the SGE array of receive WQE w (a slot of a receive queue);
// n must fit the slot (the queue's maxSGE does), as wqeSGEs' for sends.
func recvSGEs(w *abi.RxeRecvWqe, n int) []abi.RxeSge {
	return unsafe.Slice((*abi.RxeSge)(unsafe.Add(unsafe.Pointer(w), recvWQESize)), n)
}

// close unmaps the queue (through the command file, for a mapped queue).
func (q *queue) close() error {
	if q == nil || q.mem == nil {
		return nil
	}
	mem := q.mem
	q.mem, q.data, q.prod, q.cons = nil, nil, nil, nil
	if q.f == nil {
		return nil
	}
	if err := q.f.Munmap(mem); err != nil {
		return fmt.Errorf("rxe: unmapping a queue of %d bytes: %w", len(mem), err)
	}
	return nil
}

// wcView views a kernel completion as the provider's: the two structs have
// the same size and field offsets (TestWCLayout; the array below fails to
// compile if the sizes differ), so toWC copies one whole.
func wcView(k *abi.IbUverbsWc) *provider.WorkCompletion {
	return (*provider.WorkCompletion)(unsafe.Pointer(k))
}

// A compile-time check that the sizes agree: the index is out of range
// unless they do.
var _ = [1]struct{}{}[unsafe.Sizeof(provider.WorkCompletion{})-unsafe.Sizeof(abi.IbUverbsWc{})]
