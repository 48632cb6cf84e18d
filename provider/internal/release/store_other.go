//go:build !amd64 || race

package release

import "sync/atomic"

// Store32 stores v in *p after every earlier load and store of the caller:
// sync/atomic's Store (on arm64 STLRW, a release store). amd64 without the
// race detector stores with one plain MOVL after a compiler barrier.
func Store32(p *atomic.Uint32, v uint32) { p.Store(v) }
