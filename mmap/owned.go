package mmap

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
)

// owned is the address ranges of the open Regions, for Owns: a sorted list
// replaced whole (copy on write) when a Region is mapped or closed, which
// is rare, so that Owns, which a registration asks, is a load and a search
// with no lock.
var owned struct {
	mu    sync.Mutex // serializes the writers
	spans atomic.Pointer[[]span]
}

// A span is one Region's mapping: [start, end).
type span struct{ start, end uintptr }

// own adds a Region's mapping to owned.
func own(start uintptr, n int) {
	owned.mu.Lock()
	defer owned.mu.Unlock()
	var old []span
	if p := owned.spans.Load(); p != nil {
		old = *p
	}
	s := span{start, start + uintptr(n)}
	i, _ := slices.BinarySearchFunc(old, s.start, func(e span, a uintptr) int { return cmp.Compare(e.start, a) })
	next := slices.Insert(slices.Clone(old), i, s)
	owned.spans.Store(&next)
}

// disown removes the mapping that starts at start from owned.
func disown(start uintptr) {
	owned.mu.Lock()
	defer owned.mu.Unlock()
	p := owned.spans.Load()
	if p == nil {
		return
	}
	i, found := slices.BinarySearchFunc(*p, start, func(e span, a uintptr) int { return cmp.Compare(e.start, a) })
	if !found {
		return
	}
	next := slices.Delete(slices.Clone(*p), i, i+1)
	owned.spans.Store(&next)
}

// ownsRange reports whether [start, start+n) lies within one open Region's
// mapping.
func ownsRange(start uintptr, n int) bool {
	p := owned.spans.Load()
	if p == nil || n <= 0 || start+uintptr(n) < start {
		return false
	}
	s := *p
	// The last span starting at or before start is the only candidate.
	lo, hi := 0, len(s)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s[m].start <= start {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo > 0 && start+uintptr(n) <= s[lo-1].end
}
