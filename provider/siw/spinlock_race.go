//go:build race

package siw

// unlock releases the lock with sync/atomic's store: the race detector
// sees no happens-before edge through an assembly store
// (spinlock_unsafe.go), and would report the critical sections of two
// goroutines as racing.
func (l *spinLock) unlock() { l.v.Store(0) }
