package uverbs

import (
	"sync"
	"sync/atomic"
)

// registry is a context's table of its live objects of one kind. The
// kernel names a CQ, QP or SRQ in its completion and async events by the
// user handle the object was created with; that handle is the object's
// tag here: a slot's index (low 32 bits) and the slot's generation (high
// 32), so a lookup is an index and a compare, and an event for an object
// destroyed meanwhile finds nothing even when its slot was reused.
// Context.Close releases what is left in each table.
//
// It replaced sync.Maps keyed by the handle: their Store and Delete cost
// ~800 instructions an object (an interface hash each, an allocation per
// Store), a fifth of a registration's and deregistration's user time.
// Every method takes the lock, held for a few dozen instructions.
type registry[T any] struct {
	mu    sync.Mutex
	slots []regSlot[T]
	free  []uint32 // indexes of unused slots
	// taken is set by the first take, under mu: a table never used
	// (a context opened and closed, with nothing made in it) is drained
	// without the lock, ~70 instructions each of Context.Close's five.
	// A take that sets it after collect's load is one that would have
	// waited for collect's lock, and found the table drained, anyway.
	taken atomic.Bool
}

type regSlot[T any] struct {
	gen  uint32 // bumped at each reserve: a stale tag's generation differs
	used bool
	v    *T // nil while reserved and not yet set
}

// reserve takes a slot and returns its tag, before the object exists:
// the tag goes into the command that creates it, and into the object
// before set shows it to the other goroutines (Context.Close, the event
// readers). load returns nil for it until set; remove gives it back if
// the creation fails.
func (r *registry[T]) reserve() uint64 {
	r.mu.Lock()
	tag := r.take(nil)
	r.mu.Unlock()
	return tag
}

// insert is reserve and set in one locked step, for objects whose tag no
// command carries (MRs, channels): it stores the tag in *tag before the
// table shows v, so a Context.Close that drains v at once reads it.
func (r *registry[T]) insert(v *T, tag *uint64) {
	r.mu.Lock()
	*tag = r.take(v)
	r.mu.Unlock()
}

// take puts v (nil: reserved) in a free slot, or a new one, and returns
// the slot's tag (r.mu held).
func (r *registry[T]) take(v *T) uint64 {
	var i uint32
	if n := len(r.free); n > 0 {
		i = r.free[n-1]
		r.free = r.free[:n-1]
	} else {
		i = uint32(len(r.slots))
		r.slots = append(r.slots, regSlot[T]{})
		if i == 0 {
			r.taken.Store(true)
		}
	}
	s := &r.slots[i]
	s.gen++
	if s.gen == 0 {
		s.gen = 1 // a tag is never 0
	}
	s.used, s.v = true, v
	return uint64(s.gen)<<32 | uint64(i)
}

// slot is tag's slot if it is in use by that tag (r.mu held).
func (r *registry[T]) slot(tag uint64) *regSlot[T] {
	i := uint32(tag)
	if int(i) >= len(r.slots) {
		return nil
	}
	s := &r.slots[i]
	if !s.used || s.gen != uint32(tag>>32) {
		return nil
	}
	return s
}

// set makes tag's slot name v.
func (r *registry[T]) set(tag uint64, v *T) {
	r.mu.Lock()
	if s := r.slot(tag); s != nil {
		s.v = v
	}
	r.mu.Unlock()
}

// abandon frees tag's slot if *err is set: deferred by a create after
// reserve, so every failed creation gives its slot back.
func (r *registry[T]) abandon(tag uint64, err *error) {
	if *err != nil {
		r.remove(tag)
	}
}

// remove frees tag's slot; a tag already removed (or drained) is ignored.
func (r *registry[T]) remove(tag uint64) {
	r.mu.Lock()
	if s := r.slot(tag); s != nil {
		s.used, s.v = false, nil
		r.free = append(r.free, uint32(tag))
	}
	r.mu.Unlock()
}

// load returns the object tag names, or nil.
func (r *registry[T]) load(tag uint64) *T {
	r.mu.Lock()
	var v *T
	if s := r.slot(tag); s != nil {
		v = s.v
	}
	r.mu.Unlock()
	return v
}

// drain frees every slot and returns the objects they named.
func (r *registry[T]) drain() []*T { return r.collect(true) }

// list returns the objects in use, leaving them in place.
func (r *registry[T]) list() []*T { return r.collect(false) }

// collect returns the objects in use (set, not only reserved) and, with
// free, frees every slot in use, reserved ones included.
func (r *registry[T]) collect(free bool) []*T {
	if !r.taken.Load() {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var vs []*T
	for i := range r.slots {
		s := &r.slots[i]
		if !s.used {
			continue
		}
		if s.v != nil {
			vs = append(vs, s.v)
		}
		if free {
			s.used, s.v = false, nil
			r.free = append(r.free, uint32(i))
		}
	}
	return vs
}
