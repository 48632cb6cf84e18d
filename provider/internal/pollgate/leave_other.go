//go:build !amd64 || race

package pollgate

// Leave marks the poller out, after every load and store of its poll: a
// release store (sync/atomic's Store; on arm64 STLRW). amd64 without the
// race detector stores with one plain MOVL after a compiler barrier.
func (g *Gate) Leave() { g.in.Store(0) }
