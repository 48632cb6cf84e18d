//go:build amd64 && !race

// The //go:build line constrains this file (a name ending in _unsafe.go
// carries no GOARCH): amd64 without the race detector; store_other.go has
// the rest.

package release

import (
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/doorbell"
)

// Store32 stores v in *p after every earlier load and store of the caller.
//
// amd64: a compiler barrier (doorbell.ToDevice: a sync/atomic load, which
// Go's compiler keeps every memory access on its side of) and one plain
// MOVL. An x86 store is a release store: TSO lets no earlier load or store
// pass it. The race detector's build uses sync/atomic's Store, so that it
// sees the ordering.
func Store32(p *atomic.Uint32, v uint32) {
	doorbell.ToDevice()
	*(*uint32)(unsafe.Pointer(p)) = v
}
