//go:build !amd64 || race

package doorbell

import "sync/atomic"

// Publish32 stores v in *p after every earlier load and store of the
// caller, as the kernel sees them: a release store of a producer or consumer
// index, or of the flags word that hands a ring entry over (rxe's queue
// indices, siw's entries). It is for memory the kernel shares with this
// process, never for a word another goroutine reads, and it orders nothing
// after the store: where a load must not pass it, use sync/atomic's Store.
//
// Here (not amd64, or the race detector on) it is sync/atomic's Store: on
// arm64 STLRW, a release store. amd64 without the race detector stores with
// one MOVL after a compiler barrier.
func Publish32(p *atomic.Uint32, v uint32) { p.Store(v) }
