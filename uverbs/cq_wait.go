package uverbs

import (
	"context"
	"os"
	"time"

	"github.com/goverbs/goverbs/abi"
	"golang.org/x/sys/unix"
)

// DefaultWaitSpin is how long CQ.Wait polls an empty CQ at most before it
// arms the CQ and parks, unless CQOptions.WaitSpin says otherwise. It is
// long enough to cover a round trip on an emulated machine (rxe under
// QEMU TCG: 0.1-1 ms); a CQ whose waits keep outlasting it stops
// spinning (see CQ.Wait).
const DefaultWaitSpin = time.Millisecond

// WaitSpinEnv names the environment variable that, set to a duration
// (time.ParseDuration: "200us", "5ms"; negative: no spinning), replaces
// DefaultWaitSpin for the CQs a program creates without
// CQOptions.WaitSpin, as rdma-core's RDMAV_* and rsocket's settings tune a
// program from outside.
const WaitSpinEnv = "GOVERBS_WAIT_SPIN"

// WaitSpinMaxEnv names the environment variable that, set to a duration,
// replaces the growth limit (CQOptions.WaitSpinMax) of the CQs a program
// creates without one; "0" or a duration not above the cap: no growth.
const WaitSpinMaxEnv = "GOVERBS_WAIT_SPIN_MAX"

// defaultWaitSpin is DefaultWaitSpin, or WaitSpinEnv's duration.
var defaultWaitSpin = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(WaitSpinEnv)); err == nil && d != 0 {
		return d
	}
	return DefaultWaitSpin
}()

// defaultWaitSpinMax is WaitSpinMaxEnv's duration; set, it replaces a
// CQOptions.WaitSpinMax of 0 (ok false: unset or unreadable).
var defaultWaitSpinMax, defaultWaitSpinMaxSet = func() (time.Duration, bool) {
	v, set := os.LookupEnv(WaitSpinMaxEnv)
	if !set {
		return 0, false
	}
	d, err := time.ParseDuration(v)
	return d, err == nil
}()

// spinChunk is how many polls Wait's spin makes between two looks at its
// budget (a timed spin's clock, an untimed one's count).
const spinChunk = 64

// spinTimedChunks: a timed spin reads the clock once in this many chunks
// (a clock read is a syscall under some clocksources: it must not count as
// the cost of a poll).
const spinTimedChunks = 8

// spinKernelChunks: a spin enters the kernel (enterKernel) and looks at
// ctx once in this many chunks, or in every chunk while its yields find
// other work on its CPU (see waitSpin.yielded).
const spinKernelChunks = 8

// spinYieldTaken: a yield that lasted more than this many times the least
// the CQ has seen gave its CPU to another task (an empty one is a syscall
// and a pass through the scheduler: ~1-2 µs under TCG, a fraction of a µs
// on hardware).
const spinYieldTaken = 3

// enterKernel yields the spinning thread's CPU (sched_yield), so that a
// task woken on that CPU, most often a kernel worker doing the work the
// spin waits for, runs now rather than when the spin ends. rxe on 6.12
// and 7.x sends and receives from work queue items (rxe_wq, unbound); in
// a guest whose CPUs all run spinners (a ping-pong's two sides on the
// rig's two vCPUs) the worker can only take a spinner's CPU.
//
// Any kernel entry would let a kernel with lazy preemption (Linux 6.13
// on; Debian's 7.3.4 runs it by default) switch to a task woken on a CPU
// whose current task runs in user space; without one that task waits for
// the next tick (4 ms at HZ 250), and a spin holds off rxe's worker for
// its whole length. rxe0 under TCG, rsocket's 64 B round trips
// (test/perf/rtt.sh, five rounds in one boot, medians), one raw getppid
// per 512 polls (~40 µs of spinning) against none: Linux 7.3.4 mean 219
// µs against 306, p90 353 against 905; 6.1 46.7 against 52.4. But a plain
// entry switches only if the scheduler prefers the woken task there, and
// EEVDF (6.6 on) keeps a runner with slice left on its CPU: with
// sched_yield, whose runner gives way to the tasks its CPU has queued,
// rsocket's 64 B round trip took 0.90-0.93 of getppid's time on 7.3.4 and
// 0.77 on 6.12, its 64 B stream went 1.37-1.52x as fast, its 4 KiB round
// trip 0.84-0.85 (test/perf/figures.sh, 5 rounds, rxe0); on 6.1, whose
// rxe sends within the doorbell's syscall, 0.98-1.03 (rtt.sh, 6 rounds:
// means 67.7 against 65.3 µs, p50 51.5 against 53.9); siw0 on 7.3.4 (siw
// sends within the doorbell's syscall too): 64 B 0.97, 4 KiB 1.06,
// streams 1.28-1.34x (docs/COST.md, sessions 50 and 51).
//
// The price: on a CPU shared with other runnable tasks, each yield lets
// them run (up to a slice) while the spin waits, which is what a spin
// ought to give a loaded machine. Raw, as the runtime's own osyield: no
// runtime bookkeeping (Syscall's entersyscall and exitsyscall).
func enterKernel() { unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

// spinCalibrateEvery: one spinning Wait in this many reads the clock, to
// keep the cost of a poll (which converts WaitSpin into polls) current.
const spinCalibrateEvery = 256

// spinCalibrateIntervals is how many clock intervals a timed spin must see
// for its least to time a poll (see calibrate). A spin with fewer leaves
// the cost unmeasured, and the next wait is timed again: a cap too short
// for two intervals (WaitSpin of a few tens of µs) spins by the clock.
const spinCalibrateIntervals = 2

// spinGiveUp is how many waits in a row must park (their spin found
// nothing) before Wait stops spinning; it then spins (for spinProbeLength
// caps) on one wait in spinProbeEvery, and spins on every wait again once
// a spin finds a completion.
const (
	spinGiveUp      = 16
	spinProbeEvery  = 8
	spinProbeLength = 4 // a probe spins for this many caps
)

// The cap's growth (CQOptions.WaitSpinMax): a wait that ended within the
// growth limit asks for a cap of spinGrowNum/spinGrowDen times its length;
// a larger ask raises the cap at once, a smaller one lowers it by
// 1/spinShrinkDen of the difference (a stream's waits alternate short and
// long: the long ones set the cap), and a parked wait longer than the
// limit lowers it by 1/spinShrinkLongDen of its height above WaitSpin.
const (
	spinGrowNum, spinGrowDen = 3, 2
	spinShrinkDen            = 32
	spinShrinkLongDen        = 4
)

// waitSpin is a CQ's spin state. Wait spins for at most the cap (WaitSpin
// converted into polls of the empty CQ by the measured cost of one, so
// that a spin reads the clock only around its yields) and stops spinning
// while its waits outlast the cap. With a growth limit above WaitSpin the
// cap follows the waits the CQ has seen, between the two.
type waitSpin struct {
	capNs  int64 // the cap in ns; <= 0: never spin
	baseNs int64 // WaitSpin in ns: the cap's floor
	maxNs  int64 // the cap's growth limit; <= baseNs: the cap stays baseNs
	pollPs int64 // cost of one empty poll, picoseconds; 0: not measured yet
	waits  int64 // spinning waits, for the periodic calibration and the probes
	parks  int64 // waits in a row that parked after their spin
	// The spin's kernel entries: every is the chunks from one to the
	// next (1 to spinKernelChunks), yieldNs the least time a yield took
	// (0: none yet).
	every   int
	yieldNs int64
}

// newWaitSpin is the spin state of a CQ created with WaitSpin d and
// WaitSpinMax limit (0s: their defaults).
func newWaitSpin(d, limit time.Duration) waitSpin {
	if d == 0 {
		d = defaultWaitSpin
	}
	if limit == 0 && defaultWaitSpinMaxSet {
		limit = defaultWaitSpinMax
	}
	s := waitSpin{capNs: int64(d), baseNs: int64(d), every: spinKernelChunks}
	if d > 0 && limit > d {
		s.maxNs = int64(limit)
	}
	return s
}

// grows reports whether the cap follows the waits (then Wait times the
// waits that park).
func (s *waitSpin) grows() bool { return s.maxNs > 0 }

// spent is the time polls polls took, by the last calibration (0 before
// one).
func (s *waitSpin) spent(polls int64) int64 { return polls * s.pollPs / 1000 }

// observe records that a wait ended after ns nanoseconds with a
// completion: the cap moves towards what would have covered it, and a
// wait within the growth limit counts as found (the waits that park in a
// row, which stop the spinning, are those longer than the limit).
func (s *waitSpin) observe(ns int64) {
	if !s.grows() || ns <= 0 {
		return
	}
	if ns > s.maxNs {
		s.capNs -= (s.capNs - s.baseNs) / spinShrinkLongDen
		return
	}
	s.parks = 0 // the cap now covers such a wait: spin on the next
	want := max(ns*spinGrowNum/spinGrowDen, s.baseNs)
	if want >= s.capNs {
		s.capNs = min(want, s.maxNs)
		return
	}
	s.capNs -= (s.capNs - want) / spinShrinkDen
}

// capPolls is the cap in polls (0 until a poll has been timed).
func (s *waitSpin) capPolls() int64 {
	if s.pollPs <= 0 {
		return 0
	}
	return max(s.capNs*1000/s.pollPs, 1)
}

// budget is how many polls the next wait may spin (0: none), and whether
// it reads the clock to time them (then it spins for the cap by the
// clock).
func (s *waitSpin) budget() (polls int64, timed bool) {
	if s.capNs <= 0 {
		return 0, false
	}
	s.waits++
	if s.parks >= spinGiveUp {
		if s.waits%spinProbeEvery != 0 {
			return 0, false // waits outlast the cap: park at once, probe now and then
		}
		if s.pollPs > 0 {
			// A probe spins longer: in a ping-pong whose two sides both
			// park, the peer's answer comes after its own wake-up, and
			// only a spin that outlasts that finds it and lets both
			// sides spin again.
			return spinProbeLength * s.capPolls(), false
		}
	}
	if s.pollPs <= 0 || s.waits%spinCalibrateEvery == 0 {
		return -1, true
	}
	return s.capPolls(), false
}

// found records a spin that found a completion.
func (s *waitSpin) found() { s.parks = 0 }

// parked records a wait that parked.
func (s *waitSpin) parked() {
	if s.capNs > 0 {
		s.parks++
	}
}

// calibrate records that polls polls took ns nanoseconds, the least of
// intervals clock intervals a timed spin saw. A spin shorter than one
// clock interval (spinTimedChunks chunks) does not count: its time is
// mostly the clock reads' (a syscall each under hpet), and it would make
// a poll look dear and the cap, in polls, far too short. Nor does a spin
// of fewer than spinCalibrateIntervals intervals: the least of one is
// what a descheduled thread saw as often as not, and the first
// calibration has no earlier one to bound it (a unit test under -race on
// a loaded 2-core machine: one 512-poll interval of 8.4 ms against a
// median of 0.23, a poll 36x too dear, so a 450 ms cap spun 12 ms). A
// poll may look at most twice as dear as the last calibration said: a
// timed spin whose thread was descheduled or interrupted in every interval
// (a vCPU the host ran something else on, the driver's softirq) would
// otherwise shrink the cap, in polls, for the next spinCalibrateEvery
// waits, and a ping-pong then parked a third of its waits (rsocket under
// TCG, session 12).
func (s *waitSpin) calibrate(polls, ns int64, intervals int) {
	if polls < spinChunk*spinTimedChunks || ns <= 0 || intervals < spinCalibrateIntervals {
		return
	}
	ps := max(ns*1000/polls, 1)
	if s.pollPs > 0 && ps > 2*s.pollPs {
		ps = 2 * s.pollPs
	}
	s.pollPs = ps
}

// yielded records that a spin's yield took ns nanoseconds and sets the
// chunks to the next one. A yield that gave the CPU away (it took
// spinYieldTaken times the least seen) says that other tasks want this
// CPU, most often the kernel worker doing the work the spin waits for:
// the spin yields after every chunk from then on; each yield that finds
// nothing to run doubles the interval, back to spinKernelChunks. rxe0
// under TCG (test/perf/figures.sh, 7 rounds, this against a yield every 8
// chunks, one boot per kernel): rsocket's 64 B round trip 0.97 of the
// fixed rule's time on 7.3.4, 0.88 on 6.12, 1.01 on 6.1; 4 KiB 0.97,
// 1.06, 0.94; streams 0.94x-1.12x (docs/COST.md, session 51). A rule
// with a fixed bound instead (10 µs) measured 0.86, 0.89 and 0.90 at 64 B
// in other boots: the bound relative to the least yield is kept because
// it holds on hardware too, where an empty yield is far shorter.
func (s *waitSpin) yielded(ns int64) {
	if s.yieldNs == 0 || ns < s.yieldNs {
		s.yieldNs = ns
	}
	if ns > spinYieldTaken*s.yieldNs {
		s.every = 1
	} else if s.every < spinKernelChunks {
		s.every *= 2
	}
}

// spin polls the CQ, found empty by Wait, for the adaptive spin budget.
// It reports whether it ended the wait (with completions, an error or
// ctx's error) and how many polls it spent.
func (cq *CQ) spin(ctx context.Context, wc []WorkCompletion) (n int, ended bool, polls int64, err error) {
	s := &cq.spinner
	limit, timed := s.budget()
	if limit == 0 {
		return 0, false, 0, nil
	}
	// A timed spin reads the clock every spinTimedChunks chunks; the
	// cheapest of those intervals, less the time its yields took, is what
	// a poll costs (an interrupted one only looks dearer).
	var start, mark, least, yields int64
	var intervals int
	if timed {
		start = abi.Nanotime()
		mark = start
	}
	done := ctx.Done()
	next := s.every // the chunk after which the spin yields
	for chunks := 1; ; chunks++ {
		for range spinChunk {
			polls++
			if n, err = cq.Poll(wc); n > 0 || err != nil {
				if err != nil {
					if e := cq.waitClosed(); e != nil {
						err = e // closed while spinning: Wait's own error
					}
				}
				if timed {
					s.calibrate(spinChunk*spinTimedChunks, least, intervals)
				}
				s.found()
				return n, true, polls, err
			}
		}
		if chunks == next {
			t := abi.Nanotime()
			enterKernel()
			d := abi.Nanotime() - t
			s.yielded(d)
			yields += d
			next = chunks + s.every
			// ctx as seldom: a look at a channel costs ~60
			// instructions, as much as two polls.
			if done != nil {
				select {
				case <-done:
					return 0, true, polls, ctx.Err()
				default:
				}
			}
		}
		if timed {
			if chunks%spinTimedChunks != 0 {
				continue
			}
			now := abi.Nanotime()
			if d := now - mark - yields; least == 0 || d < least {
				least = d
			}
			intervals++
			mark, yields = now, 0
			if now-start >= s.capNs {
				s.calibrate(spinChunk*spinTimedChunks, least, intervals)
				return 0, false, polls, nil
			}
		} else if polls >= limit {
			return 0, false, polls, nil
		}
	}
}
