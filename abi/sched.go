package abi

import (
	"runtime"
	"sync/atomic"
)

// PassScheduler is called after each ordinary syscall (one made through
// the runtime's entersyscall, as unix.Syscall makes it) of this package
// and of rdmacm's: once the process's ordinary syscalls have gone
// passEvery (8 ms) without a pass through the scheduler, it makes one
// (runtime.Gosched).
//
// Why: the runtime's monitor (sysmon) preempts a goroutine whose P has
// run the same scheduling tick for 10 ms, and a goroutine in a syscall
// cannot be preempted, so from then on the monitor takes its P at every
// tick the goroutine spends in a syscall, even with other Ps idle (the
// check that leaves a syscall's P alone while one is idle uses the time
// the syscall was first seen, which the preemption path skips setting;
// runtime.retake in Go 1.26's proc.go). Each take hands the P to a thread
// that finds nothing to run and parks again, and resets the monitor to
// its shortest nap (20 µs). The tick counts the goroutine's runs, not its
// syscalls, so a goroutine that only commands the kernel (a set-up loop,
// ibvcost's slow path) never moves it: after 10 ms of that, every command
// longer than a nap costs a thread wake-up, a futex round trip and more
// naps. Measured on the host, a loop of 200 µs blocking syscalls at
// GOMAXPROCS 2 made ~3 futex calls and one monitor nap per syscall, and
// 630 futex calls in all with a Gosched every 5 ms; in the rig, an AH's
// create and destroy took 0.67-0.92 of the time in five boots with a pass
// every 8 ms, MR and PD pairs 0.89-1.08 (docs/COST.md, session 56). Raw
// syscalls (Ioctl.Quick) never enter this: the monitor sees a running
// goroutine and preempts it with a signal at its next return to Go code.
func PassScheduler() {
	now := Nanotime()
	last := lastPass.Load()
	if now-last < passEvery || !lastPass.CompareAndSwap(last, now) {
		return
	}
	runtime.Gosched()
}

// passEvery is under the monitor's 10 ms, so that the tick has moved
// whenever the monitor looks at it twice 10 ms apart (5 ms cost MR
// registration more in the rig: docs/COST.md, session 56).
const passEvery = 8e6 // ns

// lastPass is when PassScheduler last passed through the scheduler
// (Nanotime), for the whole process: with several goroutines commanding
// at once, one of them passes each time.
var lastPass atomic.Int64
