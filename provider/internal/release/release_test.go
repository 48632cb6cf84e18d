package release

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// TestStore32Publishes passes messages through a flag stored with Store32:
// a reader that sees the flag must see the data written before it (under
// -race, the race detector checks the ordering as well). The waits yield:
// with one P (-cpu 1) a bare spin hands over only at the runtime's 10 ms
// preemption, and 40,000 hand-overs outlast the test's timeout.
func TestStore32Publishes(t *testing.T) {
	var flag atomic.Uint32
	var data [4]int // plain memory, published by the flag
	const rounds = 20000
	done := make(chan int)
	go func() {
		bad := 0
		for i := 1; i <= rounds; i++ {
			for flag.Load() != 1 {
				runtime.Gosched()
			}
			for _, d := range data {
				if d != i {
					bad++
				}
			}
			flag.Store(0) // hand the buffer back
		}
		done <- bad
	}()
	for i := 1; i <= rounds; i++ {
		for flag.Load() != 0 {
			runtime.Gosched()
		}
		for k := range data {
			data[k] = i
		}
		Store32(&flag, 1)
	}
	if bad := <-done; bad != 0 {
		t.Fatalf("%d reads saw data older than the flag", bad)
	}
	if v := flag.Load(); v != 0 {
		t.Fatalf("flag %d after the last round, want 0", v)
	}
}
