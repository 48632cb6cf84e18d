package queuelock

import "testing"

func TestMutex(t *testing.T) {
	var on Mutex
	on.Lock()
	if on.TryLock() {
		t.Error("TryLock took a held mutex")
	}
	on.Unlock()
	if !on.TryLock() {
		t.Error("TryLock failed on a free mutex")
	}
	on.Unlock()

	off := Mutex{Off: true}
	off.Lock()
	off.Lock() // no lock: a second Lock does not block
	if !off.TryLock() {
		t.Error("TryLock failed on a mutex that is off")
	}
	off.Unlock()
	off.Unlock() // no lock: unlocking twice does not panic
}
