package abi

import "testing"

// PassScheduler passes through the scheduler once per passEvery, not at
// every ordinary syscall: lastPass moves only when passEvery has gone by.
func TestPassSchedulerRate(t *testing.T) {
	lastPass.Store(0)
	PassScheduler() // the first ordinary syscall passes
	first := lastPass.Load()
	if first == 0 {
		t.Fatal("the first call did not pass through the scheduler")
	}
	PassScheduler()
	if got := lastPass.Load(); got != first {
		t.Errorf("a call %v after the last pass passed again (lastPass %d -> %d)", Nanotime()-first, first, got)
	}
	stale := Nanotime() - passEvery - 1
	lastPass.Store(stale)
	PassScheduler()
	if got := lastPass.Load(); got == stale {
		t.Error("a call more than passEvery after the last pass did not pass")
	}
}

// PassScheduler is on the path of every ordinary command: it allocates
// nothing.
func TestPassSchedulerAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(1000, PassScheduler); n != 0 {
		t.Errorf("PassScheduler allocates %v times a call", n)
	}
}
