//go:build amd64 && !race

// The //go:build line constrains this file (a name ending in _unsafe.go
// carries no GOARCH): amd64 without the race detector; leave_other.go has
// the rest.

package pollgate

import (
	"unsafe"

	"github.com/goverbs/goverbs/doorbell"
)

// Leave marks the poller out, after every load and store of its poll.
//
// amd64: a compiler barrier and one plain MOVL. An x86 store is a release
// store (TSO: no earlier load or store passes it), so the locked XCHG of
// sync/atomic's Store buys nothing here; under QEMU's TCG a locked
// instruction costs ~11 ns, a fifth of an empty poll. The race detector's
// build uses sync/atomic's Store, so that it sees the handshake.
func (g *Gate) Leave() {
	doorbell.ToDevice() // the compiler keeps the poll's accesses before the store
	*(*uint32)(unsafe.Pointer(&g.in)) = 0
}
