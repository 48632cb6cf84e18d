package pollgate

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// state stands for a mapped queue: live is 1 until the closer "unmaps" it,
// which it may do only once no poller reads it.
type state struct {
	gate Gate
	live int // a plain field: under -race, a read that the gate does not order is reported
}

// TestGateOrdersUnmap runs a poller and a closer that replaces the state,
// waits and unmaps, many times over: the poller must never find a current
// state unmapped while inside.
func TestGateOrdersUnmap(t *testing.T) {
	var cur atomic.Pointer[state]
	cur.Store(&state{live: 1})
	const swaps = 20000
	var stop atomic.Bool
	var reads, bad atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the poller
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			s := cur.Load()
			s.gate.Enter()
			if cur.Load() == s {
				if i%16 == 0 {
					runtime.Gosched() // widen the window a broken gate would leave open
				}
				if s.live != 1 {
					bad.Add(1)
				}
				reads.Add(1)
			}
			s.gate.Leave()
		}
	}()
	for range swaps { // the closer, each swap after a read of the last state
		for last := reads.Load(); reads.Load() == last; {
			runtime.Gosched()
		}
		old := cur.Load()
		cur.Store(&state{live: 1})
		old.gate.Wait()
		old.live = 0
	}
	stop.Store(true)
	wg.Wait()
	if n := bad.Load(); n != 0 {
		t.Fatalf("%d of %d reads found their state unmapped", n, reads.Load())
	}
}

func TestGateBusy(t *testing.T) {
	var g Gate
	if g.Busy() {
		t.Fatal("a zero Gate is busy")
	}
	g.Enter()
	if !g.Busy() {
		t.Fatal("Busy false after Enter")
	}
	done := make(chan struct{})
	go func() { g.Wait(); close(done) }()
	g.Leave()
	<-done // Wait returns once the poller is out
	if g.Busy() {
		t.Fatal("Busy true after Leave")
	}
}
