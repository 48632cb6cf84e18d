//go:build amd64 && !race

// The //go:build line constrains this file (a name ending in _unsafe.go
// carries no GOARCH): amd64 without the race detector; publish_other.go
// has the rest.

package doorbell

import (
	"sync/atomic"
	"unsafe"
)

// Publish32 stores v in *p after every earlier load and store of the
// caller, as the kernel sees them: a release store of a producer or consumer
// index, or of the flags word that hands a ring entry over (rxe's queue
// indices, siw's entries). It is for memory the kernel shares with this
// process, never for a word another goroutine reads (to the Go memory model
// the store is plain on amd64), and it orders nothing after the store: where
// a load must not pass it (siw's send doorbell rule reads the previous
// entry's flags), use sync/atomic's Store, whose XCHG is a full barrier.
//
// amd64: ToDevice (a compiler barrier) and one MOVL. An x86 store is a
// release store (TSO: no earlier load or store passes it), so the locked
// XCHG of sync/atomic's Store buys nothing here and costs ~2 ns natively
// and ~11 ns under QEMU's TCG (measured in the rig). Under the race
// detector, and on other architectures (arm64: STLRW, a release store), it
// is sync/atomic's Store.
func Publish32(p *atomic.Uint32, v uint32) {
	ToDevice()
	*(*uint32)(unsafe.Pointer(p)) = v
}
