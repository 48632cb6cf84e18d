package mlx5

import (
	"sync/atomic"
	"unsafe"
)

// storePlain stores v in *p with an ordinary store, no locked instruction
// (sync/atomic's Store is an XCHG on amd64, a full barrier that waits for
// the WQE's stores ahead of it to drain). It is for the counters of a
// single-threaded QP (provider.QPAttr.SingleThreaded): the program orders
// every access to them, so no other goroutine reads them meanwhile.
func storePlain(p *atomic.Uint32, v uint32) {
	*(*uint32)(unsafe.Pointer(p)) = v
}

// storeCounter stores a counter the post and the poll share (a queue's pub
// or tail): with a plain store on a single-threaded QP, else atomically.
func storeCounter(p *atomic.Uint32, v uint32, single bool) {
	if single {
		storePlain(p, v)
	} else {
		p.Store(v)
	}
}
