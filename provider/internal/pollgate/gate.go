// Package pollgate lets a queue's one poller read a mapping that another
// goroutine may unmap, for one locked instruction a poll: the poller
// enters (an atomic exchange, a full barrier), checks that the queue is
// still current, reads, and leaves (a release store: on amd64 a plain
// store, x86 keeping earlier loads and stores ahead of it). The closer
// first replaces the queue, so that a poller entering afterwards sees the
// swap and leaves without reading, then waits until the gate is empty, and
// only then unmaps.
//
// Why it is safe (Dekker's pattern): the poller stores to the gate and then
// loads the queue's state; the closer stores the state and then loads the
// gate. Both stores are sync/atomic operations, full barriers, so at least
// one side sees the other's store: the poller sees the new state and does
// not read, or the closer sees the poller inside and waits for its Leave,
// which no read of the poll's passes.
//
// One goroutine polls at a time (a gate is a flag, not a count): that is
// the providers' rule for Poll already. A counter that any number of
// goroutines enter and leave (sync/atomic's Add, two locked instructions)
// is what the rest need. rdma-core's providers take a spin lock around a
// poll (one locked instruction, the unlock a plain store): the same price.
package pollgate

import (
	"runtime"
	"sync/atomic"

	"github.com/goverbs/goverbs/provider/internal/release"
)

// Gate is the poller's presence. Its zero value is empty.
type Gate struct {
	in atomic.Uint32
}

// Enter marks the poller inside. Load the queue's state after it, and read
// the queue only if the state is still the one the closer has not replaced.
func (g *Gate) Enter() { g.in.Store(1) }

// Leave marks the poller out, after every load and store of its poll: a
// release store (package release; on amd64 a plain store).
func (g *Gate) Leave() { release.Store32(&g.in, 0) }

// Busy reports whether the poller is inside.
func (g *Gate) Busy() bool { return g.in.Load() != 0 }

// Wait returns once the poller is out: call it after replacing the state,
// before unmapping the old one's memory. A poll reads a bounded number of
// entries, so the wait is short unless the poller's goroutine was
// descheduled inside, and then yielding lets it run.
func (g *Gate) Wait() {
	for g.Busy() {
		runtime.Gosched()
	}
}
