package uverbs

import (
	"context"
	"os"
	"time"
)

// DefaultWaitSpin is how long CQ.Wait polls an empty CQ at most before it
// arms the CQ and parks, unless CQOptions.WaitSpin says otherwise. It is
// long enough to cover a round trip on an emulated machine (rxe under
// QEMU TCG: 0.1-1 ms) and is only spent by CQs whose recent waits were
// shorter than it (see CQ.Wait).
const DefaultWaitSpin = time.Millisecond

// spinChunk is how many polls Wait's spin makes between two looks at ctx.
const spinChunk = 64

// spinCalibrateEvery: one spinning Wait in this many reads the clock, to
// keep the cost of a poll (which converts WaitSpin into polls) current.
const spinCalibrateEvery = 256

// waitSpin is a CQ's adaptive spin state. Wait keeps, in polls of the
// empty CQ, a moving average of how long its recent waits took, and spins
// for up to twice that, never longer than the cap (WaitSpin converted into
// polls by the measured cost of one). A spin that finds a completion reads
// no clock and makes no syscall; a wait that parks reads the clock twice
// (around the park) to learn how long it took.
type waitSpin struct {
	capNs  int64 // the cap in ns; <= 0: never spin
	avg    int64 // moving average of recent waits, polls; < 0: no wait seen yet
	pollPs int64 // cost of one empty poll, picoseconds; 0: not measured yet
	waits  int64 // spinning waits, for the periodic calibration
}

// WaitSpinEnv names the environment variable that, set to a duration
// (time.ParseDuration: "200us", "5ms"; negative: no spinning), replaces
// DefaultWaitSpin for the CQs a program creates without
// CQOptions.WaitSpin, as rdma-core's RDMAV_* and rsocket's settings tune a
// program from outside.
const WaitSpinEnv = "GOVERBS_WAIT_SPIN"

// defaultWaitSpin is DefaultWaitSpin, or WaitSpinEnv's duration.
var defaultWaitSpin = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(WaitSpinEnv)); err == nil && d != 0 {
		return d
	}
	return DefaultWaitSpin
}()

func newWaitSpin(d time.Duration) waitSpin {
	if d == 0 {
		d = defaultWaitSpin
	}
	return waitSpin{capNs: int64(d), avg: -1}
}

// capPolls is the cap in polls (0 until a poll has been timed).
func (s *waitSpin) capPolls() int64 {
	if s.pollPs <= 0 {
		return 0
	}
	return s.capNs * 1000 / s.pollPs
}

// budget is how many polls the next wait may spin, and whether it reads
// the clock to time them.
func (s *waitSpin) budget() (polls int64, timed bool) {
	if s.capNs <= 0 {
		return 0, false
	}
	s.waits++
	if s.pollPs <= 0 || s.waits%spinCalibrateEvery == 0 {
		// Not calibrated (or due): spin, timed, for the cap, counted in
		// chunks against the clock.
		return -1, true
	}
	c := s.capPolls()
	switch {
	case s.avg < 0:
		return c, false // no history: try the whole cap once
	case s.avg > c:
		// Recent waits were longer than the cap: park at once, but probe
		// with a whole spin now and then. A parked wait measures the
		// wake-up too, so parked waits alone could keep the average
		// above the cap for good.
		if s.waits%spinProbeEvery != 0 {
			return 0, false
		}
		return c, false
	}
	return min(max(2*s.avg, spinChunk), c), false
}

// spinProbeEvery: a CQ whose waits outlast the cap still spins (for the
// whole cap) on one wait in this many.
const spinProbeEvery = 8

// learn folds one wait of n polls into the average; spun says whether a
// spin found the completion (such a wait is measured exactly, a parked
// one with the wake-up's cost on top, so a spun wait shorter than the
// average counts for half of it).
func (s *waitSpin) learn(n int64, spun bool) {
	if c := s.capPolls(); c > 0 && n > 2*c {
		n = 2 * c // one long wait must not stop the spinning for long
	}
	switch {
	case s.avg < 0:
		s.avg = n
	case spun && n < s.avg:
		s.avg = (s.avg + n) / 2
	default:
		s.avg += (n - s.avg) / 4
	}
}

// calibrate records that polls polls took ns nanoseconds.
func (s *waitSpin) calibrate(polls, ns int64) {
	if polls > 0 && ns > 0 {
		s.pollPs = max(ns*1000/polls, 1)
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
	var start int64
	if timed {
		start = nanotime()
	}
	done := ctx.Done()
	for {
		for range spinChunk {
			polls++
			if n, err = cq.Poll(wc); n > 0 || err != nil {
				if timed {
					s.calibrate(polls, nanotime()-start)
				}
				s.learn(polls, true)
				return n, true, polls, err
			}
		}
		if done != nil {
			select {
			case <-done:
				return 0, true, polls, ctx.Err()
			default:
			}
		}
		if timed {
			if el := nanotime() - start; el >= s.capNs {
				s.calibrate(polls, el)
				return 0, false, polls, nil
			}
		} else if polls >= limit {
			return 0, false, polls, nil
		}
	}
}

// parked records a wait that spun polls polls, then parked from t0 until
// now.
func (cq *CQ) parked(polls, t0 int64) {
	s := &cq.spinner
	if s.capNs <= 0 || s.pollPs <= 0 {
		return
	}
	s.learn(polls+(nanotime()-t0)*1000/s.pollPs, false)
}
