// Package queuelock is the lock of a provider's work queue, which a
// single-threaded queue turns off (provider.QPAttr.SingleThreaded: the
// program orders every call on the QP as one goroutine's calls, so a post
// need not take a lock, as with rdma-core's thread domains). mlx5's and
// rxe's send and receive queues and siw's send queue use it (siw's receive
// queue has a spin lock of its own); a lock that is on costs what
// sync.Mutex's uncontended Lock and Unlock cost (two locked instructions),
// one that is off a test of a bool.
package queuelock

import "sync"

// Mutex is a sync.Mutex unless Off. Its zero value is an unlocked mutex.
type Mutex struct {
	mu sync.Mutex
	// Off makes Lock and Unlock do nothing. It is set when the queue is
	// made, before any other goroutine can see it, and never changed.
	Off bool
}

// Lock locks m, unless it is off.
func (m *Mutex) Lock() {
	if !m.Off {
		m.mu.Lock()
	}
}

// Unlock unlocks m, unless it is off.
func (m *Mutex) Unlock() {
	if !m.Off {
		m.mu.Unlock()
	}
}

// TryLock locks m if it is free and reports whether it did; it always
// succeeds on a mutex that is off.
func (m *Mutex) TryLock() bool { return m.Off || m.mu.TryLock() }
