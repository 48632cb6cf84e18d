//go:build !race

package siw

import (
	"unsafe"

	"github.com/goverbs/goverbs/doorbell"
)

// unlock releases the lock with a store-release: the critical section's
// stores are visible before the lock is seen free, which is all a lock's
// release needs (pthread_spin_unlock is a plain store on x86 too).
func (l *spinLock) unlock() { doorbell.StoreRelease32(unsafe.Pointer(&l.v), 0) }
